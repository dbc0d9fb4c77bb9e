"""Reading a policy file: YAML, then the model, then the checks no schema can state.

Every problem is reported with its file, line and key path (``check`` prints
them all at once); ``read_policy`` and ``load_policy_file`` raise SourceError
with all of them, and the server refuses to start or reload on any.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gateway.policy.file import (
    FieldRule,
    PolicyFile,
    Select,
    merge_rule,
)
from gateway.policy.values import ValueSpec
from gateway.yamlsource import (
    Problem,
    SourceError,
    YamlDocument,
    decode_source,
    parse_yaml,
    read_source,
)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at ``loc`` (for "did you mean"): walk the
    models' fields along ``loc``, a mapping's key or a list's index skipped."""
    model: type[BaseModel] | None = PolicyFile
    pending: Any = None  # the annotation of a dict or list field still to step into
    for key in loc[:-1]:
        if pending is not None:
            model, pending = _model_of(pending), None
            continue
        if model is None:
            return None
        info = model.model_fields.get(str(key))
        if info is None:
            return None
        annotation = info.annotation
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
            annotation = members[0]  # X | None
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin in (dict, list):
            pending = args[-1]
            model = None
        else:
            model = _model_of(annotation)
    return model if pending is None else None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    # RouteOverlay's fields are plain dicts of a rule's keys (a patch).
    if typing.get_origin(annotation) is dict:
        return FieldRule
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


def impossible(spec: ValueSpec, name: str) -> list[tuple[tuple[Any, ...], str]]:
    """Where ``spec`` (and the specs of its items and values) accepts no value at all:
    (key path inside the spec, message). Such a rule is a typo, not a policy."""
    found: list[tuple[tuple[Any, ...], str]] = []
    every = "no value can pass, every request with the field would be refused"
    for low, high in (
        ("minimum", "maximum"),
        ("min_items", "max_items"),
        ("min_length", "max_length"),
    ):
        lo, hi = getattr(spec, low), getattr(spec, high)
        if lo is not None and hi is not None and lo > hi:
            found.append(((low,), f"{low} {lo} is above {high} {hi}: {every}"))
    kinds = set(spec.type if isinstance(spec.type, list) else [spec.type])
    if (
        kinds == {"integer"}
        and spec.minimum is not None
        and spec.maximum is not None
        and spec.minimum <= spec.maximum
        and math.ceil(spec.minimum) > math.floor(spec.maximum)
    ):
        found.append((("minimum",), f"no integer lies between minimum and maximum: {every}"))
    if spec.enum is not None:
        if not spec.enum:
            found.append((("enum",), f"an empty enum: {every}"))
        elif not found and all(spec.check(v, name) is not None for v in spec.enum):
            found.append((("enum",), f"every enum value fails the field's own checks: {every}"))
    for key in ("items", "values"):
        inner = getattr(spec, key)
        if inner is not None:
            found.extend(((key, *at), message) for at, message in impossible(inner, name))
    return found


def _semantic_problems(doc: YamlDocument, policy: PolicyFile) -> list[Problem]:
    problems: list[Problem] = []

    def problem(where: tuple[Any, ...], message: str) -> None:
        problems.append(doc.problem(where, message))

    def check_rule(where: tuple[Any, ...], name: str, rule: FieldRule) -> None:
        """One rule's own keys (``where`` is its location in the file)."""
        for at, message in impossible(rule, name):
            problem((*where, *at), message)
        for index, value in enumerate(rule.neutral):
            error = rule.check(value, name)
            if error is not None:
                problem(
                    (*where, "neutral", index),
                    f"neutral value {json.dumps(value)} fails the field's own check: "
                    f"{error.message}",
                )
        if rule.has_value:
            error = rule.check(rule.value, name)
            if error is not None:
                problem(
                    (*where, "value"), f"default value fails the field's own check: {error.message}"
                )
        kinds = set(rule.type if isinstance(rule.type, list) else [rule.type])
        if rule.fields is not None:
            if not kinds & {"object", "any"}:
                problem((*where, "fields"), "'fields' is for object values, and type excludes them")
            check_fields((*where, "fields"), rule.fields)
        if rule.json_schema is not None and not kinds & {"object", "any"}:
            problem(
                (*where, "json_schema"),
                "'json_schema' is for a value that is a JSON Schema (an object), and type "
                "excludes objects",
            )
        if rule.select is not None:
            if not kinds & {"object", "array", "any"}:
                problem(
                    (*where, "select"),
                    "'select' is for arrays of objects or an object, and type excludes both",
                )
            check_select((*where, "select"), rule.select)

    def check_select(where: tuple[Any, ...], select: Select) -> None:
        members = {**select.rules, "": select.unknown}
        for value, rule in members.items():
            at = (*where, "rules", value) if value else (*where, "unknown")
            if rule.action in ("default", "fanout"):
                problem((*at, "action"), f"action '{rule.action}' is not for a select's rules")
            if rule.action == "rename" and rule.to is not None:
                target = select.rules.get(rule.to)
                if rule.to == value:
                    problem((*at, "to"), "renames onto itself")
                elif target is None:
                    problem(
                        (*at, "to"),
                        f"renames {select.key} onto '{rule.to}', which these rules do not name",
                    )
                elif target.action == "reject":
                    problem(
                        (*at, "to"),
                        f"renames {select.key} onto '{rule.to}', which these rules reject: "
                        "the renamed member would bypass that rule",
                    )
            check_rule(at, f"{select.key} '{value}'", rule)

    def check_fields(
        where: tuple[Any, ...], fields: dict[str, FieldRule], *, top: bool = False
    ) -> None:
        for name, rule in fields.items():
            if rule.action == "fanout":
                if not top or name != "n":
                    problem((*where, name, "action"), "action 'fanout' is only for the field 'n'")
                elif rule.maximum is None:
                    problem(
                        (*where, name),
                        "action 'fanout' needs 'maximum' (the most requests one client request "
                        "may become)",
                    )
            check_rule((*where, name), name, rule)
            if rule.to is not None:
                target = fields.get(rule.to)
                if rule.to == name:
                    problem((*where, name, "to"), "renames onto itself")
                elif target is not None and target.action not in ("pass", "default"):
                    problem(
                        (*where, name, "to"),
                        f"renames onto '{rule.to}', which this route also names with "
                        f"action '{target.action}': the renamed value would bypass that rule",
                    )
                others = [o for o, r in fields.items() if r.to == rule.to and o != name]
                if others:
                    problem(
                        (*where, name, "to"), f"renames onto '{rule.to}', as '{others[0]}' does too"
                    )
            for other in rule.requires or {}:
                if other == name:
                    problem((*where, name, "requires"), "requires itself")

    def check_route(where: tuple[Any, ...], fields: dict[str, FieldRule]) -> None:
        check_fields(where, fields, top=True)

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
