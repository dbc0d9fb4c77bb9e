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

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.values import ValueSpec, json_equal
from gateway.yamlsource import Problem, SourceError, YamlDocument, load_yaml, parse_yaml

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


def policy_schema() -> dict[str, Any]:
    """JSON Schema of policy files (``ft-gateway schema``)."""
    schema = PolicyFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema


def _problems_from_validation(
    doc: YamlDocument, exc: ValidationError, prefix: tuple[Any, ...]
) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = (*prefix, *(p for p in err["loc"] if not str(p).startswith("function-after")))
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "literal_error":
            message = f"{err['msg']}, got {err['input']!r}"
        problems.append(doc.problem(loc, message))
    return problems


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
                            _problems_from_validation(doc, exc, (*where, "fields", field_name))
                        )
                check_route((*where, "fields"), merged)
    return problems


def read_policy(doc: YamlDocument) -> PolicyFile:
    """Validate a parsed policy document; SourceError lists every problem."""
    if not isinstance(doc.data, dict):
        raise SourceError([doc.problem((), "a policy file must be a mapping")])
    try:
        policy = PolicyFile.model_validate(doc.data)
    except ValidationError as exc:
        raise SourceError(_problems_from_validation(doc, exc, ())) from exc
    problems = _semantic_problems(doc, policy)
    if problems:
        raise SourceError(problems)
    return policy


def load_policy_file(path: str | Path) -> tuple[PolicyFile, str]:
    """Load and check a policy file; returns it with the SHA-256 of its bytes."""
    doc = load_yaml(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return read_policy(doc), digest


def parse_policy_text(text: str, *, file: str = "<policy>") -> PolicyFile:
    """Parse and check policy YAML given as text (tests, probe)."""
    return read_policy(parse_yaml(text, file=file))
