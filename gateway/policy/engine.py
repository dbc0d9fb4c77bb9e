"""The policy engine: pure, no web framework, no HTTP client.

``apply_policy(policy, route, body)`` takes a parsed request body and returns a
Decision: the body to forward (the same object when nothing changed, so the
caller can forward the client's original bytes), what was done to which field,
or the InvalidRequest the client gets. The server, ``ft-gateway explain`` and
the fuzz tests all call this one function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.errors import InvalidRequest
from gateway.policy.file import FieldRule, PolicyFile, RoutePolicy, UnknownAction, merge_rule

# Outcomes recorded per field. "passed" is only recorded when tracing (explain):
# the hot path records only what the operator needs to count.
PASSED = "passed"
NEUTRAL = "neutral"
REJECTED = "rejected"
STRIPPED = "stripped"
RENAMED = "renamed"
DEFAULTED = "defaulted"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the policy did with one field."""

    field: str
    action: str
    detail: str = ""


@dataclass(slots=True)
class Decision:
    """The policy's answer for one request."""

    body: dict[str, Any]
    changed: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    error: InvalidRequest | None = None


@dataclass(frozen=True, slots=True)
class CompiledRoute:
    """A route's rules with one model's and one profile's overlays already laid on."""

    rules: dict[str, FieldRule]
    unknown: UnknownAction
    required: tuple[str, ...]
    defaults: tuple[tuple[str, Any], ...]
    requires: tuple[tuple[str, FieldRule], ...]


def _compile(rules: dict[str, FieldRule], unknown: UnknownAction) -> CompiledRoute:
    return CompiledRoute(
        rules=rules,
        unknown=unknown,
        required=tuple(n for n, r in rules.items() if r.required),
        defaults=tuple((n, r.value) for n, r in rules.items() if r.action == "default"),
        requires=tuple((n, r) for n, r in rules.items() if r.requires),
    )


class Policy:
    """A checked policy file, compiled for fast lookups."""

    def __init__(self, source: PolicyFile, *, digest: str = "", path: str = "") -> None:
        self.source = source
        self.digest = digest
        self.path = path
        self.loaded_at = datetime.now(UTC)
        self._routes: dict[str, RoutePolicy] = {str(k): v for k, v in source.routes.items()}
        self._cache: dict[tuple[str, str | None, str | None], CompiledRoute | None] = {}
        for route in source.routes:
            self.route(route)

    @property
    def routes(self) -> tuple[str, ...]:
        return tuple(self.source.routes)

    def route(
        self, route: str, *, model: str | None = None, profile: str | None = None
    ) -> CompiledRoute | None:
        """The compiled rules for ``route`` (None if the policy has no such route)."""
        if model is not None and model not in self.source.models:
            model = None
        key = (route, model, profile)
        try:
            return self._cache[key]
        except KeyError:
            pass
        compiled = self._build(route, model, profile)
        if len(self._cache) < 4096:
            self._cache[key] = compiled
        return compiled

    def _build(self, route: str, model: str | None, profile: str | None) -> CompiledRoute | None:
        base = self._routes.get(route)
        if base is None:
            return None
        rules = dict(base.fields)
        unknown = base.unknown_fields or self.source.unknown_fields
        overlays = []
        if model is not None:
            overlays.append(self.source.models[model])
        if profile is not None and profile in self.source.profiles:
            overlays.append(self.source.profiles[profile])
        for overlay in overlays:
            ro = overlay.routes.get(route)
            if ro is None:
                continue
            for name, patch in ro.fields.items():
                rules[name] = merge_rule(rules.get(name), patch)
            unknown = ro.unknown_fields or unknown
        return _compile(rules, unknown)


def _unsupported(name: str, value: Any, rule: FieldRule) -> InvalidRequest:
    supported = [n for n in rule.neutral if n is not None]
    reason = f" {rule.reason}" if rule.reason else ""
    if not supported or rule.type == "boolean":
        return InvalidRequest(
            f"Unsupported parameter: '{name}' is not supported by this deployment.{reason}",
            param=name,
            code="unsupported_parameter",
        )
    shown = ", ".join(json.dumps(n) for n in supported)
    return InvalidRequest(
        f"Unsupported value: '{name}' does not support {json.dumps(value)[:60]} on this "
        f"deployment. Supported values are: {shown}.{reason}",
        param=name,
        code="unsupported_value",
    )


def apply_policy(
    policy: Policy,
    route: str,
    body: dict[str, Any],
    *,
    profile: str | None = None,
    trace: bool = False,
) -> Decision:
    """Check ``body`` against the policy for ``route``; never raises for bad input.

    Four steps, each recording its outcomes: every field present against its
    rule, the required fields, the cross-field ``requires``, and (only when
    nothing was rejected) the rewrite: strips, renames, defaults. The first
    problem found is the client's error; the others are still recorded.
    """
    model = body.get("model")
    compiled = policy.route(route, model=model if isinstance(model, str) else None, profile=profile)
    decision = Decision(body=body)
    if compiled is None:
        return decision
    outcomes = decision.outcomes
    edits = _Edits()
    # Every step runs, so that every problem is recorded; the first is the answer.
    in_fields = _check_fields(compiled, body, outcomes, edits, trace=trace)
    in_required = _check_required(compiled, body, outcomes)
    in_requires = _check_requires(compiled, body, outcomes)
    error = in_fields or in_required or in_requires
    if error is not None:
        decision.error = error
    else:
        _rewrite(compiled, decision, edits)
    return decision


@dataclass(slots=True)
class _Edits:
    """What the field step found to change, applied by the rewrite step."""

    drop: list[str] = field(default_factory=list)
    renames: list[tuple[str, str]] = field(default_factory=list)


def _check_fields(
    compiled: CompiledRoute,
    body: dict[str, Any],
    outcomes: list[Outcome],
    edits: _Edits,
    *,
    trace: bool,
) -> InvalidRequest | None:
    """Each field present, against its rule (or the unknown-field rule)."""
    error: InvalidRequest | None = None
    drop = edits.drop
    rules = compiled.rules
    for name, value in body.items():
        rule = rules.get(name)
        if rule is None:
            if compiled.unknown == "pass":
                if trace:
                    outcomes.append(Outcome(name, UNKNOWN, "not named by the policy; passed"))
                continue
            if compiled.unknown == "strip":
                drop.append(name)
                outcomes.append(Outcome(name, STRIPPED, "not named by the policy"))
                continue
            outcomes.append(Outcome(name, REJECTED, "unknown parameter"))
            error = error or InvalidRequest(
                f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter"
            )
            continue
        action = rule.action
        if action == "strip":
            drop.append(name)
            outcomes.append(Outcome(name, STRIPPED))
            continue
        problem = rule.check(value, name)
        if problem is None and rule.required and value is None:
            problem = _missing(name)
        if problem is not None:
            outcomes.append(Outcome(name, REJECTED, problem.message))
            error = error or problem
            continue
        if action == "reject":
            if rule.is_neutral(value):
                if rule.drop_neutral:
                    drop.append(name)
                outcomes.append(
                    Outcome(name, NEUTRAL, "dropped" if rule.drop_neutral else "forwarded")
                )
                continue
            problem = _unsupported(name, value, rule)
            outcomes.append(Outcome(name, REJECTED, problem.message))
            error = error or problem
        elif action == "rename":
            target = rule.to or name
            if target in body:
                problem = InvalidRequest(
                    f"Invalid '{name}': it cannot be given together with '{target}'.",
                    param=name,
                    code="invalid_value",
                )
                outcomes.append(Outcome(name, REJECTED, problem.message))
                error = error or problem
                continue
            edits.renames.append((name, target))
            outcomes.append(Outcome(name, RENAMED, f"to '{target}'"))
        elif trace:
            outcomes.append(Outcome(name, PASSED))
    return error


def _missing(name: str) -> InvalidRequest:
    return InvalidRequest(
        f"Missing required parameter: '{name}'.",
        param=name,
        code="missing_required_parameter",
    )


def _check_required(
    compiled: CompiledRoute, body: dict[str, Any], outcomes: list[Outcome]
) -> InvalidRequest | None:
    """The fields the route requires, when absent."""
    error: InvalidRequest | None = None
    for name in compiled.required:
        if name not in body:
            outcomes.append(Outcome(name, REJECTED, "missing"))
            error = error or _missing(name)
    return error


def _check_requires(
    compiled: CompiledRoute, body: dict[str, Any], outcomes: list[Outcome]
) -> InvalidRequest | None:
    """Cross-field rules: a field given (and not neutral) needs others to hold values."""
    error: InvalidRequest | None = None
    for name, rule in compiled.requires:
        value = body.get(name)
        if value is None or (rule.action == "reject" and rule.is_neutral(value)):
            continue
        for other, expected in (rule.requires or {}).items():
            if body.get(other) != expected or type(body.get(other)) is not type(expected):
                problem = InvalidRequest(
                    f"Invalid '{name}': it is only allowed when '{other}' is "
                    f"{json.dumps(expected)}.",
                    param=name,
                    code="invalid_value",
                )
                outcomes.append(Outcome(name, REJECTED, problem.message))
                error = error or problem
                break
    return error


def _rewrite(compiled: CompiledRoute, decision: Decision, edits: _Edits) -> None:
    """Strips, renames and defaults into a new body; the client's stays untouched."""
    body = decision.body
    missing_defaults = [(n, v) for n, v in compiled.defaults if n not in body]
    if not (edits.drop or edits.renames or missing_defaults):
        return
    new_body = {k: v for k, v in body.items() if k not in edits.drop}
    for source, target in edits.renames:
        new_body[target] = new_body.pop(source)
    for name, value in missing_defaults:
        new_body[name] = value
        decision.outcomes.append(Outcome(name, DEFAULTED, json.dumps(value)))
    decision.body = new_body
    decision.changed = True
