"""The policy engine: pure, no web framework, no HTTP client.

``apply_policy(policy, route, body)`` takes a parsed request body and returns a
Decision: the body to forward (the same object when nothing changed, so the
caller can forward the client's original bytes), what was done to which field,
or the InvalidRequest the client gets, what report-only rules would have
refused (``reported``, with ``report``: the 400 the client would have got), and,
where the policy checks answers, what the answer is checked against (``expect``). The
server, ``ft-gateway explain``, ``ft-gateway test`` and ``diff`` and the fuzz
tests all call this one function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.errors import InvalidRequest
from gateway.policy.compiled import ObjectRules, compile_rules
from gateway.policy.fastwalk import passes
from gateway.policy.file import Enforcement, PolicyFile, RoutePolicy, merge_rule
from gateway.policy.walk import (
    DEFAULTED,
    FANOUT,
    KEPT,
    NEUTRAL,
    PASSED,
    REJECTED,
    RENAMED,
    REPORTED,
    STEPS,
    STRIPPED,
    UNKNOWN,
    Outcome,
    Report,
    Walk,
    walk_object,
)
from gateway.schemas.expect import Expectation, answers_of, expectation

__all__ = [
    "DEFAULTED",
    "FANOUT",
    "KEPT",
    "NEUTRAL",
    "PASSED",
    "REJECTED",
    "RENAMED",
    "REPORTED",
    "STEPS",
    "STRIPPED",
    "UNKNOWN",
    "Decision",
    "ObjectRules",
    "Outcome",
    "Policy",
    "Report",
    "apply_policy",
]


@dataclass(slots=True)
class Decision:
    """The policy's answer for one request."""

    body: dict[str, Any]
    changed: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    error: InvalidRequest | None = None
    # ``n`` served by fan-out: ask the engine this many times and merge (1: no fan-out).
    fanout: int = 1
    # What report-only rules would have refused (None on most requests).
    report: Report | None = None
    # What the answer is checked against (None: no answer check looks at this request).
    expect: Expectation | None = None

    @property
    def reported(self) -> tuple[Outcome, ...]:
        """The fields report-only rules would have refused (path, REPORTED, code)."""
        return self.report.fields if self.report is not None else ()


class Policy:
    """A checked policy file, compiled for fast lookups."""

    def __init__(self, source: PolicyFile, *, digest: str = "", path: str = "") -> None:
        self.source = source
        self.digest = digest
        self.path = path
        self.loaded_at = datetime.now(UTC)
        self._routes: dict[str, RoutePolicy] = {str(k): v for k, v in source.routes.items()}
        # (read on every request: a pydantic model's attribute is a slow read)
        self._models = source.models
        self._cache: dict[tuple[str, str | None, str | None], ObjectRules | None] = {}
        for route in source.routes:
            self.route(route)

    @property
    def routes(self) -> tuple[str, ...]:
        return tuple(self.source.routes)

    def route(
        self, route: str, *, model: str | None = None, profile: str | None = None
    ) -> ObjectRules | None:
        """The compiled rules for ``route`` (None if the policy has no such route)."""
        if model is not None and model not in self._models:
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

    def _build(self, route: str, model: str | None, profile: str | None) -> ObjectRules | None:
        base = self._routes.get(route)
        if base is None:
            return None
        rules = dict(base.fields)
        unknown = base.unknown_fields or self.source.unknown_fields
        enforcement: Enforcement = base.enforcement or self.source.enforcement
        answers = [base.answers]
        overlays = []
        if model is not None:
            overlays.append(self.source.models[model])
        if profile is not None and profile in self.source.profiles:
            overlays.append(self.source.profiles[profile])
        for overlay in overlays:
            ro = overlay.routes.get(route)
            enforcement = overlay.enforcement or enforcement
            answers.append(overlay.answers)
            if ro is None:
                continue
            answers.append(ro.answers)
            for name, patch in ro.fields.items():
                rules[name] = merge_rule(rules.get(name), patch)
            unknown = ro.unknown_fields or unknown
            enforcement = ro.enforcement or enforcement
        compiled = compile_rules(rules, unknown, report=enforcement == "report")
        compiled.check_answers(answers_of(answers))
        return compiled


def apply_policy(
    policy: Policy,
    route: str,
    body: dict[str, Any],
    *,
    profile: str | None = None,
    trace: bool = False,
) -> Decision:
    """Check ``body`` against the policy for ``route``; never raises for bad input.

    The walk (walk.py) records an outcome for everything it acts on, inside
    messages too; the first problem found is the client's error, and nothing
    is rewritten unless there is none.
    """
    model = body.get("model")
    compiled = policy.route(route, model=model if isinstance(model, str) else None, profile=profile)
    decision = Decision(body=body)
    if compiled is None or (not trace and passes(compiled, body, None)):
        return decision  # most requests: nothing to record, nothing to change
    walk = Walk(decision.outcomes, trace=trace)
    forwarded = walk_object(compiled, body, "", walk)
    if walk.error is not None:
        decision.error = walk.error
    elif forwarded is not body:
        decision.body = forwarded
        decision.changed = True
    decision.fanout = walk.fanout
    if compiled.answers is not None and walk.error is None:
        decision.expect = expectation(compiled.answers, route, decision.body)
    if walk.reported is not None:
        decision.report = Report(walk.report_error, tuple(walk.reported))
    return decision
