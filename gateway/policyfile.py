"""The policy file: its schema (pydantic, exported as JSON Schema), loading and checking.

A policy names, per route, what the gateway does with each request field:

    pass     forward after type and range checks
    reject   400 unless the value is one of the field's ``neutral`` values
    strip    remove before forwarding (counted)
    rename   forward under another name (``to``), after checks
    default  set ``value`` when the field is absent; checked like ``pass`` when present

``unknown_fields`` says what happens to fields the route does not name. ``models``
and ``profiles`` hold overlays: partial field rules merged over the route's rules
for one model name, or for clients whose API key names the profile.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from gateway.values import ValueSpec, json_equal
from gateway.yamlsource import (
    Problem,
    SourceError,
    YamlDocument,
    decode_source,
    parse_yaml,
    read_source,
)

Action = Literal["pass", "reject", "strip", "rename", "default"]
UnknownAction = Literal["reject", "strip", "pass"]
ROUTES = ("/v1/chat/completions", "/v1/completions")
RouteName = Literal["/v1/chat/completions", "/v1/completions"]
SCHEMA_ID = "https://ft-gateway.dev/schema/policy-v1.json"

_UNSET: Any = object()


class FieldRule(ValueSpec):
    """What the gateway does with one request field."""

    action: Action
    required: bool = Field(default=False, description="400 when the field is absent or null")
    neutral: list[Any] = Field(
        default_factory=list,
        description="values that mean 'not asked for'; accepted even when action is reject "
        "(null is always neutral for a nullable field)",
    )
    drop_neutral: bool = Field(
        default=False, description="remove a neutral value instead of forwarding it"
    )
    to: str | None = Field(default=None, description="rename: the name the engine expects")
    value: Any = Field(default=_UNSET, description="default: the value set when absent")
    requires: dict[str, Any] | None = Field(
        default=None,
        description="when set (and not neutral), these other fields must have these values",
    )
    reason: str | None = Field(default=None, description="added to the client's error message")

    @model_validator(mode="after")
    def _action_keys(self) -> FieldRule:
        if self.action == "rename" and not self.to:
            raise ValueError("action 'rename' needs 'to'")
        if self.action != "rename" and self.to is not None:
            raise ValueError("'to' is only for action 'rename'")
        if self.action == "default" and self.value is _UNSET:
            raise ValueError("action 'default' needs 'value'")
        if self.action != "default" and self.value is not _UNSET:
            raise ValueError("'value' is only for action 'default'")
        return self

    @property
    def has_value(self) -> bool:
        return self.value is not _UNSET

    def is_neutral(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return any(json_equal(value, n) for n in self.neutral)


class RoutePolicy(BaseModel):
    """The rules of one route."""

    model_config = ConfigDict(extra="forbid")

    unknown_fields: UnknownAction | None = Field(
        default=None, description="overrides the policy-wide rule for this route"
    )
    fields: dict[str, FieldRule] = Field(default_factory=dict)


class RouteOverlay(BaseModel):
    """Partial rules laid over a route's rules: each key replaces that key of the base rule."""

    model_config = ConfigDict(extra="forbid")

    unknown_fields: UnknownAction | None = None
    fields: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Overlay(BaseModel):
    """Overlays by route, for a model or a client profile."""

    model_config = ConfigDict(extra="forbid")

    routes: dict[str, RouteOverlay] = Field(default_factory=dict)


class PolicyFile(BaseModel):
    """A field policy file."""

    model_config = ConfigDict(extra="forbid", title="ft-gateway field policy")

    version: Literal[1] = 1
    description: str | None = None
    unknown_fields: UnknownAction = Field(
        default="reject", description="what to do with fields a route does not name"
    )
    routes: dict[RouteName, RoutePolicy]
    models: dict[str, Overlay] = Field(
        default_factory=dict, description="per-model overlays, by the request's 'model'"
    )
    profiles: dict[str, Overlay] = Field(
        default_factory=dict, description="named overlays that an API key can select"
    )


class _SchemaGenerator(GenerateJsonSchema):
    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        # ``value`` has no default, only a marker for "not given".
        if schema.get("default") is _UNSET:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


def policy_schema() -> dict[str, Any]:
    """JSON Schema of policy files (``ft-gateway schema``)."""
    schema = PolicyFile.model_json_schema(schema_generator=_SchemaGenerator)
    defs = schema["$defs"]
    rule = defs["FieldRule"]
    rule["allOf"] = [
        {
            "if": {"properties": {"action": {"const": action}}, "required": ["action"]},
            "then": {"required": [key]},
        }
        for action, key in (("rename", "to"), ("default", "value"))
    ]
    # An overlay's rule is a patch: the same keys, none of them required.
    patch = {k: v for k, v in rule.items() if k not in ("required", "allOf", "title")}
    patch["title"] = "FieldPatch"
    patch["description"] = "Keys laid over the route's rule of the same field."
    defs["FieldPatch"] = patch
    defs["RouteOverlay"]["properties"]["fields"]["additionalProperties"] = {
        "$ref": "#/$defs/FieldPatch"
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at ``loc`` (for "did you mean")."""
    depth = len(loc)
    if depth == 1:
        return PolicyFile
    if loc[0] == "routes":
        if depth == 3:
            return RoutePolicy
        if depth == 5:
            return FieldRule
        return ValueSpec if depth > 5 else None
    if loc[0] in ("models", "profiles"):
        if depth == 3:
            return Overlay
        if depth == 5:
            return RouteOverlay
        return FieldRule if depth == 7 else None
    return None


def _did_you_mean(word: Any, candidates: list[str]) -> str:
    close = difflib.get_close_matches(str(word), candidates, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _data_location(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` cut where it leaves the data: pydantic appends union members ("int",
    "list[...]") to the locations of errors in a union."""
    for depth, key in enumerate(loc):
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return loc[:depth]
    return loc


def _problems_from_validation(
    doc: YamlDocument, exc: ValidationError, prefix: tuple[Any, ...], data: Any = None
) -> list[Problem]:
    found: dict[tuple[Any, ...], str] = {}
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not str(p).startswith("function-after"))
        if err["type"] not in ("missing", "extra_forbidden") and data is not None:
            loc = _data_location(data, loc)
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            model = _model_at((*prefix, *loc))
            known = list(model.model_fields) if model is not None else []
            message = f"unknown key '{loc[-1]}'{_did_you_mean(loc[-1], known)}"
        elif err["type"] == "literal_error":
            expected = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
            message = f"{err['msg']}, got {json.dumps(err['input'], default=str)}" + _did_you_mean(
                err["input"], expected
            )
        else:
            if err["type"] == "value_error":
                message = message.removeprefix("Value error, ")
            elif isinstance(err.get("input"), (str, int, float)) and "got" not in message:
                message = f"{message}, got {json.dumps(err['input'])}"
            if loc in found and "Input should be '" in found[loc]:
                # Another member of the same union: keep a literal's message (it
                # lists the allowed values), else the last one's (number after integer).
                continue
        found[loc] = message
    return [doc.problem((*prefix, *loc), message) for loc, message in found.items()]


def _salvage_point(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The entry to drop so that the rest of a file around an error can still be checked."""
    loc = tuple(p for p in loc if p != "[key]")
    if len(loc) >= 4 and loc[0] == "routes" and loc[2] == "fields":
        return loc[:4]
    if len(loc) >= 6 and loc[0] in ("models", "profiles") and loc[4] == "fields":
        return loc[:6]
    if len(loc) >= 4 and loc[0] in ("models", "profiles") and loc[2] == "routes":
        return loc[:4]
    if len(loc) >= 2 and loc[0] in ("routes", "models", "profiles"):
        return loc[:3] if len(loc) >= 3 else loc[:2]
    return loc[:1]


def _without(data: dict[str, Any], locs: list[tuple[Any, ...]]) -> dict[str, Any] | None:
    """A copy of ``data`` without the entries around ``locs``; None if one is required."""
    out: dict[str, Any] = json.loads(json.dumps(data, default=str))
    dropped: list[tuple[Any, ...]] = []
    for point in sorted({_salvage_point(loc) for loc in locs}, key=len):
        if any(point[: len(d)] == d for d in dropped):
            continue
        node: Any = out
        for key in point[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or point[-1] not in node:
            return None
        del node[point[-1]]
        dropped.append(point)
    return out


def merge_rule(base: FieldRule | None, patch: dict[str, Any]) -> FieldRule:
    """Lay an overlay's partial rule over a base rule; raises ValidationError."""
    data = base.model_dump(exclude_unset=True) if base is not None else {}
    if base is not None and base.has_value and "value" not in data:
        data["value"] = base.value
    if "action" in patch and patch["action"] != "rename":
        data.pop("to", None)
    if "action" in patch and patch["action"] != "default":
        data.pop("value", None)
    data.update(patch)
    return FieldRule.model_validate(data)


def _semantic_problems(doc: YamlDocument, policy: PolicyFile) -> list[Problem]:
    problems: list[Problem] = []

    def check_route(where: tuple[Any, ...], fields: dict[str, FieldRule]) -> None:
        for name, rule in fields.items():
            for index, value in enumerate(rule.neutral):
                error = rule.check(value, name)
                if error is not None:
                    problems.append(
                        doc.problem(
                            (*where, name, "neutral", index),
                            f"neutral value {json.dumps(value)} fails the field's own check: "
                            f"{error.message}",
                        )
                    )
            if rule.has_value:
                error = rule.check(rule.value, name)
                if error is not None:
                    problems.append(
                        doc.problem(
                            (*where, name, "value"),
                            f"default value fails the field's own check: {error.message}",
                        )
                    )
            if rule.to is not None:
                target = fields.get(rule.to)
                if rule.to == name:
                    problems.append(doc.problem((*where, name, "to"), "renames onto itself"))
                elif target is not None and target.action not in ("pass", "default"):
                    problems.append(
                        doc.problem(
                            (*where, name, "to"),
                            f"renames onto '{rule.to}', which this route also names with "
                            f"action '{target.action}': the renamed value would bypass that rule",
                        )
                    )
                others = [o for o, r in fields.items() if r.to == rule.to and o != name]
                if others:
                    problems.append(
                        doc.problem(
                            (*where, name, "to"),
                            f"renames onto '{rule.to}', as '{others[0]}' does too",
                        )
                    )
            for other in rule.requires or {}:
                if other == name:
                    problems.append(doc.problem((*where, name, "requires"), "requires itself"))

    route_fields = {str(route): rp.fields for route, rp in policy.routes.items()}
    for route, fields in route_fields.items():
        check_route(("routes", route, "fields"), fields)
    for kind, overlays in (("models", policy.models), ("profiles", policy.profiles)):
        for name, overlay in overlays.items():
            for oroute, ro in overlay.routes.items():
                where: tuple[Any, ...] = (kind, name, "routes", oroute)
                if oroute not in route_fields:
                    problems.append(
                        doc.problem(where, f"overlay for route '{oroute}', which is not defined")
                    )
                    continue
                base = route_fields[oroute]
                merged: dict[str, FieldRule] = dict(base)
                for field_name, patch in ro.fields.items():
                    try:
                        merged[field_name] = merge_rule(base.get(field_name), patch)
                    except ValidationError as exc:
                        problems.extend(
                            _problems_from_validation(
                                doc, exc, (*where, "fields", field_name), patch
                            )
                        )
                check_route((*where, "fields"), merged)
    return problems


def check_policy(doc: YamlDocument) -> tuple[PolicyFile | None, list[Problem]]:
    """Validate a parsed policy document: the policy (None if anything is wrong) and
    every problem found. Entries with errors are set aside and the rest checked too,
    so one run reports everything wrong in the file."""
    if not isinstance(doc.data, dict):
        return None, [doc.problem((), "a policy file must be a mapping")]
    data: dict[str, Any] | None = doc.data
    problems: list[Problem] = []
    while data is not None:
        try:
            policy = PolicyFile.model_validate(data)
        except ValidationError as exc:
            found = _problems_from_validation(doc, exc, (), data)
            found = [p for p in found if p not in problems]
            if not found:
                break
            problems.extend(found)
            data = _without(data, [tuple(err["loc"]) for err in exc.errors()])
            continue
        problems.extend(p for p in _semantic_problems(doc, policy) if p not in problems)
        return (None if problems else policy), problems
    return None, problems


def read_policy(doc: YamlDocument) -> PolicyFile:
    """Validate a parsed policy document; SourceError lists every problem."""
    policy, problems = check_policy(doc)
    if policy is None:
        raise SourceError(problems)
    return policy


def load_policy_file(path: str | Path) -> tuple[PolicyFile, str]:
    """Load and check a policy file; returns it with the SHA-256 of its bytes."""
    data = read_source(path)
    problems: list[Problem] = []
    doc = parse_yaml(decode_source(data, file=str(path)), file=str(path), problems=problems)
    policy, found = check_policy(doc)
    if policy is None or problems:
        raise SourceError([*problems, *found])
    return policy, hashlib.sha256(data).hexdigest()


def parse_policy_text(text: str, *, file: str = "<policy>") -> PolicyFile:
    """Parse and check policy YAML given as text (tests, probe)."""
    return read_policy(parse_yaml(text, file=file))
