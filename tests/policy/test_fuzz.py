"""Fuzzing the policy engine (pure): arbitrary bodies never raise; a rejection
names its field; a forwarded body passes the policy again unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from gateway.policy.engine import apply_policy
from gateway.policy.walk import KEPT, PASSED, UNKNOWN
from tests.support.fuzzing import (
    POLICY,
    ROUTES,
    check_error_shape,
    fuzz_settings,
    is_invalid_request,
    json_values,
    request_bodies,
)

# A route, and a body: a plausible request, or any object at all.
ROUTE = st.sampled_from(ROUTES)
BODY = st.one_of(request_bodies(), st.dictionaries(st.text(max_size=8), json_values))
# 200 bodies a property in the default suite (was 400: the two were the suite's longest
# tests after the Triton ones): derandomised, the same every run, reaching inside messages
# (test_the_bodies_reach_inside_messages); the long random search is scripts/fuzz's.
EXAMPLES = 200


@fuzz_settings(EXAMPLES)
@given(route=ROUTE, body=BODY)
def test_policy_decides_every_body(route: str, body: dict[str, Any]) -> None:
    decision = apply_policy(POLICY, route, body)
    if decision.error is not None:
        assert is_invalid_request(decision.error)
        check_error_shape(decision.error.status, decision.error.openai_error(), body)
        return
    again = apply_policy(POLICY, route, decision.body)
    assert again.error is None and not again.changed, (body, decision.body)
    rules = POLICY.route(
        route, model=body.get("model") if isinstance(body.get("model"), str) else None
    )
    assert rules is not None
    for name in decision.body:
        rule = rules.rules.get(name)
        assert rule is not None, name  # unknown fields are rejected by this policy
        assert rule.action != "strip", name
        if rule.action == "reject":
            assert rule.is_neutral(decision.body[name]), name


@fuzz_settings(EXAMPLES)
@given(route=ROUTE, body=BODY)
def test_the_fast_walk_decides_as_the_full_one(route: str, body: dict[str, Any]) -> None:
    # The fast path (fastwalk.py:passes) answers most requests alone; the traced walk
    # never takes it. Both must forward the same body, refuse with the same error,
    # and record the same actions (tracing adds only "passed"/"unknown"/"kept").
    fast = apply_policy(POLICY, route, body)
    full = apply_policy(POLICY, route, body, trace=True)
    assert fast.body == full.body and fast.changed == full.changed
    assert (fast.error is None) == (full.error is None)
    if fast.error is not None and full.error is not None:
        assert (fast.error.param, fast.error.code) == (full.error.param, full.error.code)
    assert fast.fanout == full.fanout
    traced_only = {PASSED, UNKNOWN, KEPT}
    assert fast.outcomes == [o for o in full.outcomes if o.action not in traced_only]


def _rejected_inside(body: dict[str, Any], marker: str) -> bool:
    decision = apply_policy(POLICY, "/v1/chat/completions", body)
    return decision.error is not None and marker in (decision.error.param or "")


@pytest.mark.parametrize("marker", ["].content[", "].role"])
def test_the_bodies_reach_inside_messages(marker: str) -> None:
    # The strategy is worth its examples only if it gets past the top level: it
    # finds a body rejected for a content part, and one for a role.
    def inside(body: dict[str, Any]) -> bool:
        return _rejected_inside(body, marker)

    found = find(request_bodies("/v1/chat/completions"), inside, settings=fuzz_settings(2000))
    assert _rejected_inside(found, marker)
