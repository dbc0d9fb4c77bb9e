"""Walking a request against its rules: an object's keys, then inside their values.

One function, ``walk_object``, serves the request body and every object inside
it (a message, a content part, a tool call), so nested rules have exactly the
actions and checks of top-level fields. Four steps per object: each key
present against its rule (recursing into ``fields`` and ``select``), the keys
the rules require, the cross-key ``requires``, and, only when nothing was
rejected, the rewrite in a fixed order: strips, then renames, then defaults
(into keys still absent after the renames), and changed members. A
changed object is a new one: the client's parsed body is never modified, so a
request the policy does not change is forwarded as the client's own bytes.

Paths name what was wrong the way OpenAI does: ``messages[2].content[1].type``.

A refusal by a report-only rule (``Rule.report``) is recorded apart, in
``Walk.reported``, and the value is left as the client sent it: the request
goes on as if that rule were absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError, InvalidRequest
from gateway.policy.compiled import CompiledSelect, ObjectRules, Rule
from gateway.policy.fastwalk import passes
from gateway.schemas.check import SchemaCheck

# Outcomes recorded per field. "passed" is only recorded when tracing (explain):
# the hot path records only what the operator needs to count.
PASSED = "passed"
NEUTRAL = "neutral"
REJECTED = "rejected"
STRIPPED = "stripped"
RENAMED = "renamed"
DEFAULTED = "defaulted"
UNKNOWN = "unknown"
FANOUT = "fanout"
# A refusal a report-only rule would have made (kept apart from the outcomes).
REPORTED = "reported"
# explain only: a default not applied, the client having sent the value under another name.
KEPT = "kept"
# The order the rewrite applies actions in (explain lists outcomes in it):
# the checks first, then strip (and fan-out's removal of n), rename, default.
STEPS = {STRIPPED: 1, FANOUT: 1, RENAMED: 2, DEFAULTED: 3, KEPT: 3}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the policy did with one field (``field`` is its path)."""

    field: str
    action: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    """What report-only rules would have refused: each field (path, REPORTED, error
    code) and the first refusal, the 400 the client would have got (or, for a report-only
    answer check, the 502: gateway/proxy/answercheck.py)."""

    error: GatewayError
    fields: tuple[Outcome, ...]


class Walk:
    """One request's walk: the outcomes so far, the first error, the fan-out asked
    for, and what report-only rules would have refused."""

    __slots__ = ("outcomes", "trace", "error", "fanout", "reported", "report_error")
    report_error: InvalidRequest  # set with the first report (read only when reported is)

    def __init__(self, outcomes: list[Outcome], *, trace: bool) -> None:
        self.outcomes = outcomes
        self.trace = trace
        self.error: InvalidRequest | None = None
        self.fanout = 1
        self.reported: list[Outcome] | None = None  # made on the first report

    def reject(
        self, path: str, problem: InvalidRequest, *, report: bool, detail: str | None = None
    ) -> None:
        """Refuse (or, for a report-only rule, report) the value at ``path``."""
        if report:
            if self.reported is None:
                self.reported = []
                self.report_error = problem
            self.reported.append(Outcome(path, REPORTED, problem.code or ""))
            return
        self.outcomes.append(Outcome(path, REJECTED, problem.message if detail is None else detail))
        if self.error is None:
            self.error = problem


def _path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def missing(path: str) -> InvalidRequest:
    """The error for a required field that is absent (or null)."""
    return InvalidRequest(
        f"Missing required parameter: '{path}'.", param=path, code="missing_required_parameter"
    )


def unsupported(path: str, value: Any, rule: Rule) -> InvalidRequest:
    """The error for a value a ``reject`` rule does not accept."""
    source = rule.source
    supported = [n for n in source.neutral if n is not None]
    reason = f" {source.reason}" if source.reason else ""
    if not supported or source.type == "boolean":
        return InvalidRequest(
            f"Unsupported parameter: '{path}' is not supported by this deployment.{reason}",
            param=path,
            code="unsupported_parameter",
        )
    shown = ", ".join(json.dumps(n) for n in supported)
    return InvalidRequest(
        f"Unsupported value: '{path}' does not support {json.dumps(value)[:60]} on this "
        f"deployment. Supported values are: {shown}.{reason}",
        param=path,
        code="unsupported_value",
    )


def walk_object(
    compiled: ObjectRules,
    obj: dict[str, Any],
    prefix: str,
    walk: Walk,
    *,
    known: str | None = None,
) -> dict[str, Any]:
    """``obj`` checked against ``compiled``: the same object if nothing changes, else
    a changed copy. ``known``: a key the caller has dealt with (a select's key)."""
    if not walk.trace and passes(compiled, obj, known):
        return obj
    rules = compiled.rules
    drop: list[str] = []
    renames: list[tuple[str, str]] = []
    replaced: dict[str, Any] = {}
    outcomes = walk.outcomes
    trace = walk.trace
    for name, value in obj.items():
        rule = rules.get(name)
        if rule is None:
            if name == known:
                continue
            if compiled.unknown == "pass":
                if trace:
                    outcomes.append(
                        Outcome(_path(prefix, name), UNKNOWN, "not named by the policy; passed")
                    )
                continue
            path = _path(prefix, name)
            if compiled.unknown == "strip":
                drop.append(name)
                outcomes.append(Outcome(path, STRIPPED, "not named by the policy"))
                continue
            walk.reject(
                path,
                InvalidRequest(
                    f"Unknown parameter: '{path}'.", param=path, code="unknown_parameter"
                ),
                report=compiled.report,
            )
            continue
        action = rule.action
        if action == "strip":
            drop.append(name)
            outcomes.append(Outcome(_path(prefix, name), STRIPPED))
            continue
        if type(value) in rule.accepts:
            problem = None  # the common case: a bare type check (paths built only when needed)
        else:
            problem = rule.check(value, _path(prefix, name))
        if problem is None and rule.required and value is None:
            problem = missing(_path(prefix, name))
        if problem is not None:
            walk.reject(_path(prefix, name), problem, report=rule.report)
            continue
        if action == "reject":
            if rule.is_neutral(value):
                if rule.drop_neutral:
                    drop.append(name)
                detail = "dropped" if rule.drop_neutral else "forwarded"
                outcomes.append(Outcome(_path(prefix, name), NEUTRAL, detail))
                continue
            path = _path(prefix, name)
            walk.reject(path, unsupported(path, value, rule), report=rule.report)
            continue
        if action == "fanout":
            if value is not None and value != 1:
                walk.fanout = value
                drop.append(name)
                outcomes.append(Outcome(_path(prefix, name), FANOUT, f"{value} requests"))
                continue
        if action == "rename":
            target = rule.to or name
            if target in obj:
                path = _path(prefix, name)
                walk.reject(
                    path,
                    InvalidRequest(
                        f"Invalid '{path}': it cannot be given together with "
                        f"'{_path(prefix, target)}'.",
                        param=path,
                        code="invalid_value",
                    ),
                    report=rule.report,
                )
                continue
            renames.append((name, target))
            outcomes.append(Outcome(_path(prefix, name), RENAMED, f"to '{target}'"))
        elif trace:
            outcomes.append(Outcome(_path(prefix, name), PASSED))
        if rule.nested and (type(value) is list or type(value) is dict):
            if rule.schema is not None and type(value) is dict:
                _check_schema(rule.schema, rule.report, value, _path(prefix, name), obj, walk)
            inner = walk_value(rule, value, _path(prefix, name), walk)
            if inner is not value:
                replaced[name] = inner

    for name in compiled.required:
        if name not in obj:
            path = _path(prefix, name)
            walk.reject(path, missing(path), report=rules[name].report, detail="missing")
    for name, rule in compiled.requires:
        value = obj.get(name)
        if value is None or (rule.action == "reject" and rule.is_neutral(value)):
            continue
        for other, expected in (rule.requires or {}).items():
            if obj.get(other) != expected or type(obj.get(other)) is not type(expected):
                path = _path(prefix, name)
                walk.reject(
                    path,
                    InvalidRequest(
                        f"Invalid '{path}': it is only allowed when '{_path(prefix, other)}' "
                        f"is {json.dumps(expected)}.",
                        param=path,
                        code="invalid_value",
                    ),
                    report=rule.report,
                )
                break

    if walk.error is not None:
        return obj
    # The rewrite, in the order docs/policy.md gives: strip, rename, default. A
    # default fills only a key still absent after the renames: a value the client
    # sent under another name (max_completion_tokens) is never overridden.
    missing_defaults = None
    if compiled.defaults:
        renamed = {target: source for source, target in renames}
        missing_defaults = []
        for name, value in compiled.defaults:
            if name in obj:
                continue
            if name in renamed:
                if trace:
                    outcomes.append(
                        Outcome(
                            _path(prefix, name),
                            KEPT,
                            f"sent as '{_path(prefix, renamed[name])}'; "
                            f"default {json.dumps(value)} not applied",
                        )
                    )
                continue
            missing_defaults.append((name, value))
    if not (drop or renames or replaced or missing_defaults):
        return obj
    new = {k: replaced.get(k, v) for k, v in obj.items() if k not in drop}
    for source, target in renames:
        new[target] = new.pop(source)
    for name, value in missing_defaults or ():
        new[name] = value
        outcomes.append(Outcome(_path(prefix, name), DEFAULTED, json.dumps(value)))
    return new


def _check_schema(
    check: SchemaCheck,
    report: bool,
    value: dict[str, Any],
    path: str,
    obj: dict[str, Any],
    walk: Walk,
) -> None:
    """A JSON Schema value against its rule's ``json_schema`` (gateway/schemas/check.py):
    each refusal, by the rule's enforcement (``report``) unless the
    keyword's rule sets its own."""
    refusals = check.refusals(value, path, obj)
    for problem, own in refusals:
        walk.reject(problem.param or path, problem, report=report if own is None else own)
    if walk.trace and not refusals:
        walk.outcomes.append(Outcome(path, PASSED, "JSON Schema checked"))


def walk_value(rule: Rule, value: Any, path: str, walk: Walk) -> Any:
    """Inside a value its own rule passed: the rule's ``select`` (on an array's
    members, or on an object), else its ``fields`` (on an object); an input of token
    ids by ``token_ids``."""
    select = rule.select
    if select is not None:
        if isinstance(value, list):
            return _select_members(select, value, path, walk)
        if isinstance(value, dict):
            return _select_one(select, value, path, walk)
        return value
    if rule.object_rules is not None and isinstance(value, dict):
        return walk_object(rule.object_rules, value, path, walk)
    if rule.token_ids is not None and is_token_ids(value):
        return _token_ids(rule.token_ids, value, path, walk)
    return value


def is_token_ids(value: Any) -> bool:
    """Whether an embeddings input is token ids: an array of integers, or of integer
    arrays (its members' types are checked by the field's own rule)."""
    return type(value) is list and bool(value) and type(value[0]) in (int, list)


def _token_ids(rule: Rule, value: Any, path: str, walk: Walk) -> Any:
    if rule.action == "reject":
        reason = f" {rule.source.reason}" if rule.source.reason else ""
        walk.reject(
            path,
            InvalidRequest(
                f"Unsupported value: '{path}' given as token ids is not supported by this "
                f"deployment.{reason}",
                param=path,
                code="unsupported_value",
            ),
            report=rule.report,
        )
    elif walk.trace:
        walk.outcomes.append(Outcome(path, PASSED, "token ids"))
    return value


_STRIPPED: Any = object()


def _select_members(select: CompiledSelect, members: list[Any], path: str, walk: Walk) -> list[Any]:
    changed: list[Any] | None = None
    passed = select.passed
    key = select.key
    fast = not walk.trace
    for index, member in enumerate(members):
        if fast and type(member) is dict:
            # The common case first: a member its rule passes as it is.
            chosen = member.get(key)
            inner = passed.get(chosen) if type(chosen) is str else None
            if inner is not None and type(member) in inner[1] and passes(inner[0], member, key):
                if changed is not None:
                    changed.append(member)
                continue
        where = f"{path}[{index}]"
        if not isinstance(member, dict):
            walk.reject(
                where,
                InvalidRequest(
                    f"Invalid type for '{where}': expected an object.",
                    param=where,
                    code="invalid_type",
                ),
                report=select.report,
            )
            continue
        result = _select_one(select, member, where, walk)
        if result is not member and changed is None:
            changed = members[:index]
        if changed is not None and result is not _STRIPPED:
            changed.append(result)
    return members if changed is None else changed


def _select_one(select: CompiledSelect, obj: dict[str, Any], path: str, walk: Walk) -> Any:
    """``obj`` under the rule its key's value chooses; ``_STRIPPED`` if it is dropped."""
    key = select.key
    chosen = obj.get(key)
    if chosen is None and select.absent is not None and key not in obj:
        chosen = select.absent
    rule = select.rules.get(chosen) if type(chosen) is str else None
    if rule is not None and rule.action == "pass" and not walk.trace:
        # The common case (a known role, a text part): straight to the member's keys.
        if type(obj) not in rule.accepts:
            problem = rule.check(obj, path)
            if problem is not None:
                walk.reject(path, problem, report=rule.report)
                return obj
        if rule.object_rules is not None:
            return walk_object(rule.object_rules, obj, path, walk, known=key)
        return walk_value(rule, obj, path, walk) if rule.select is not None else obj
    where = f"{path}.{key}"
    if chosen is None:
        walk.reject(where, missing(where), report=select.report)
        return obj
    if not isinstance(chosen, str):
        walk.reject(
            where,
            InvalidRequest(
                f"Invalid type for '{where}': expected a string.", param=where, code="invalid_type"
            ),
            report=select.report,
        )
        return obj
    named = rule is not None
    if rule is None:
        rule = select.unknown
    action = rule.action
    if action == "strip":
        walk.outcomes.append(Outcome(path, STRIPPED, f"{key} '{chosen}'"))
        return _STRIPPED
    if action == "reject":
        if not rule.is_neutral(obj):
            walk.reject(
                where, _unselected(select, chosen, where, rule, named=named), report=rule.report
            )
            return obj
        walk.outcomes.append(
            Outcome(path, NEUTRAL, "dropped" if rule.drop_neutral else "forwarded")
        )
        return _STRIPPED if rule.drop_neutral else obj
    if type(obj) not in rule.accepts:
        problem = rule.check(obj, path)
        if problem is not None:
            walk.reject(path, problem, report=rule.report)
            return obj
    out = obj
    if action == "rename" and rule.to is not None:
        out = {**obj, key: rule.to}
        walk.outcomes.append(Outcome(where, RENAMED, f"'{chosen}' to '{rule.to}'"))
    elif walk.trace:
        walk.outcomes.append(Outcome(where, PASSED, f"rule for '{chosen}'" if named else ""))
    if rule.object_rules is not None:
        return walk_object(rule.object_rules, out, path, walk, known=key)
    if rule.select is not None:
        return walk_value(rule, out, path, walk)
    return out


def _unselected(
    select: CompiledSelect, chosen: str, where: str, rule: Rule, *, named: bool
) -> InvalidRequest:
    shown = _quoted_list(select.supported)
    reason = f" {rule.source.reason}" if rule.source.reason else ""
    if not named:
        # OpenAI's own answer to an unknown role: 400 invalid_value naming messages[i].role.
        return InvalidRequest(
            f"Invalid value: '{chosen}'. Supported values are: {shown}.{reason}",
            param=where,
            code="invalid_value",
        )
    return InvalidRequest(
        f"Unsupported value: '{where}' does not support '{chosen}' on this deployment. "
        f"Supported values are: {shown}.{reason}",
        param=where,
        code="unsupported_value",
    )


def _quoted_list(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    if not quoted:
        return "none"
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
