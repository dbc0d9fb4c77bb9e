"""Fuzzing the policy engine (pure): arbitrary bodies never raise; a rejection
names its field; a forwarded body passes the policy again unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.policy.engine import apply_policy
from tests.support.fuzzing import (
    POLICY,
    ROUTES,
    check_error_shape,
    fuzz_settings,
    is_invalid_request,
    json_values,
    request_bodies,
)


@fuzz_settings(400)
@given(
    route=st.sampled_from(ROUTES),
    body=st.one_of(request_bodies(), st.dictionaries(st.text(max_size=8), json_values)),
)
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
