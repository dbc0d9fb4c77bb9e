"""ft-gateway explain and check know the Responses route."""

from __future__ import annotations

import json

from gateway.app.reloadable import read_policy
from gateway.commands.explain import explain_request, guess_route
from tests.support.gateways import gateway_settings
from tests.support.responses import RESPONSES, responses_request


def test_explain_takes_a_body_with_input_for_the_responses_route() -> None:
    policy = read_policy(gateway_settings().policy)
    raw = json.dumps(responses_request(tools=[{"type": "web_search"}], user="u")).encode()
    assert guess_route(raw) == RESPONSES
    result = explain_request(policy, raw)
    assert result.route == RESPONSES
    assert result.error is not None
    assert json.loads(result.error)["error"]["param"] == "tools[0].type"
    outcomes = {o.field: o.action for o in result.outcomes}
    assert outcomes["tools[0].type"] == "rejected"
    assert outcomes["user"] == "passed"


def test_explain_walks_input_items() -> None:
    policy = read_policy(gateway_settings().policy)
    body = responses_request(
        input=[{"role": "developer", "content": [{"type": "input_text", "text": "x"}]}]
    )
    result = explain_request(policy, json.dumps(body).encode())
    assert result.error is None
    outcomes = {o.field: (o.action, o.detail) for o in result.outcomes}
    assert outcomes["input[0].role"] == ("renamed", "'developer' to 'system'")
