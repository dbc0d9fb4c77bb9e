"""ft-gateway explain, check and diff know the Messages API's routes; explain answers in
the route's error shape, the one its clients read."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gateway.app.reloadable import read_policy
from gateway.commands.explain import explain_request, guess_route
from gateway.errorshapes import error_shape
from gateway.messages.count import TranslatedCount
from gateway.messages.native import NativeCount, NativeMessages
from gateway.messages.route import TranslatedMessages
from tests.support.anthropic import COUNT_PATH, MESSAGES_PATH, messages_request, tools_policy
from tests.support.commands import ft_gateway
from tests.support.gateways import gateway_settings


def test_explain_guesses_the_messages_route_by_its_system_and_answers_as_anthropic() -> None:
    policy = read_policy(gateway_settings().policy)
    body = messages_request(system="Be brief.", tools=[{"name": "x", "input_schema": {}}])
    raw = json.dumps(body).encode()
    assert guess_route(raw) == MESSAGES_PATH
    result = explain_request(policy, raw)
    assert result.route == MESSAGES_PATH and result.status == 400
    assert result.error is not None
    error = json.loads(result.error)
    assert error["type"] == "error" and error["error"]["message"].startswith("tools: ")
    # A chat body (no top-level system) is still chat's.
    assert (
        guess_route(json.dumps({"model": "m", "messages": []}).encode()) == "/v1/chat/completions"
    )


def test_explain_strips_the_cache_hints_and_names_the_count_route() -> None:
    policy = read_policy(gateway_settings().policy)
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    result = explain_request(policy, json.dumps(body).encode(), route=COUNT_PATH)
    assert result.error is None and result.changed
    outcomes = {o.field: o.action for o in result.outcomes}
    assert outcomes["messages[0].content[0].cache_control"] == "stripped"


def test_every_messages_route_class_answers_in_the_shape_explain_shows() -> None:
    for route in (TranslatedMessages, TranslatedCount, NativeMessages, NativeCount):
        assert route.row is not None
        assert route.call_type.responder_type.errors is error_shape(route.row.path)


def test_check_and_diff_know_the_routes(tmp_path: Path) -> None:
    done = ft_gateway("check", "policies/ft-serve.yaml")
    assert done.returncode == 0 and "10 routes" in done.stdout
    opened = tools_policy(tmp_path)
    diff = ft_gateway("diff", "policies/ft-serve.yaml", str(opened))
    assert diff.returncode == 1, diff.stdout + diff.stderr
    sections = diff.stdout.split("\n/v1/")
    messages = next(s for s in sections if s.startswith("messages\n"))
    count = next(s for s in sections if s.startswith("messages/count_tokens\n"))
    for section in (messages, count):
        assert "  tools " in section and "reject -> pass" in section, diff.stdout
    # The opened policy itself is one check accepts.
    assert (
        yaml.safe_load(opened.read_text())["routes"][MESSAGES_PATH]["fields"]["tools"]["action"]
        == "pass"
    )
    assert ft_gateway("check", str(opened)).returncode == 0
