"""The probe of /v1/responses: an engine without it (the gateway translates, and the route's
rules follow the chat route's verdicts), and one that serves it natively (each checked field
judged on the engine's own route). Both policies pass ``ft-gateway check``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.probe.client import EngineClient
from gateway.probe.report import render_markdown, render_table
from gateway.probe.responses import RESPONSES
from gateway.probe.route import CHAT
from gateway.probe.runner import planned_requests, probe_engine
from gateway.probe.verdict import HONOURED, IGNORED
from gateway.probe.writer import render_policy
from gateway.responses.translate import GATEWAY_ONLY
from tests.support.probes import DAY, run_probe
from tests.support.toyengine import ToyEngine


def test_an_engine_without_the_route_gets_translate_rules_from_the_chat_verdicts() -> None:
    result = run_probe(ToyEngine(ignore={"response_format"}), [CHAT, RESPONSES])
    assert result.responses is not None and not result.responses.native
    assert "HTTP 404" in result.responses.detail
    text = render_policy(result)
    assert "upstream.responses: translate" in text
    policy = Policy(parse_policy_text(text))
    assert [str(r) for r in policy.routes] == [CHAT, RESPONSES]
    ok = {"model": "toy", "input": "hi", "max_output_tokens": 5, "seed": 1, "temperature": 0.5}
    assert apply_policy(policy, RESPONSES, ok).error is None
    refused = apply_policy(
        policy, RESPONSES, {**ok, "text": {"format": {"type": "json_object"}}}
    ).error
    assert refused is not None and refused.param == "text.format.type"
    # Every field the translation keeps from the engine has its rule (none is unknown).
    assert GATEWAY_ONLY <= yaml.safe_load(text)["routes"][RESPONSES]["fields"].keys()
    streamed = {**ok, "stream": True, "stream_options": {"include_obfuscation": False}}
    assert apply_policy(policy, RESPONSES, streamed).error is None
    assert "not served natively" in render_table(result)
    assert "## /v1/responses" in render_markdown(result)


def native_engine(*, ignore_limit: bool = False) -> Any:
    stored: set[str] = set()

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path != RESPONSES:
            return httpx.Response(404)
        if body.get("previous_response_id") not in (None, *stored):
            return httpx.Response(400, json={"error": {"message": "previous response not found"}})
        wants_json = (body.get("text") or {}).get("format", {}).get("type") == "json_object"
        limit = body.get("max_output_tokens") or 16
        words = ["[1,", "2]"] if wants_json else ["lists", "are", "mutable", "sequences"]
        words = words if ignore_limit else words[:limit]
        response_id = f"resp_{len(stored)}"
        stored.add(response_id)
        answer = {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "output": [
                {"type": "message", "content": [{"type": "output_text", "text": " ".join(words)}]}
            ],
            "usage": {
                "input_tokens": 5,
                "output_tokens": len(words),
                "total_tokens": 5 + len(words),
            },
        }
        if body.get("stream"):
            events = [
                {"type": "response.created", "response": answer},
                {"type": "response.completed", "response": answer},
            ]
            text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
            return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=answer)

    return handler


def test_a_native_engine_is_judged_on_its_own_route() -> None:
    with EngineClient("http://native", transport=httpx.MockTransport(native_engine())) as client:
        result = probe_engine(
            client, upstream="http://native", model="m", routes=[RESPONSES], today=DAY
        )
    found = result.responses
    assert found is not None and found.native
    assert {v.field: v.outcome for v in found.verdicts} == {
        "max_output_tokens": HONOURED,
        "stream": HONOURED,
        "text": HONOURED,
        "previous_response_id": HONOURED,
    }
    assert result.requests <= planned_requests([RESPONSES])
    text = render_policy(result)
    assert "upstream.responses: native" in text
    policy = Policy(parse_policy_text(text))
    body = {"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}}
    assert apply_policy(policy, RESPONSES, body).error is None
    # What the gateway translates for a chat engine is the native engine's to honour,
    # and not probed there: refused.
    for extra in (
        {"include": ["reasoning.encrypted_content"]},
        {"input": [{"type": "item_reference", "id": "msg_1"}]},
        {"parallel_tool_calls": False},
    ):
        assert apply_policy(policy, RESPONSES, {"model": "m", "input": "x", **extra}).error
    assert "served natively" in render_table(result)


def test_a_native_engine_that_ignores_the_limit_gets_it_rejected() -> None:
    transport = httpx.MockTransport(native_engine(ignore_limit=True))
    with EngineClient("http://native", transport=transport) as client:
        result = probe_engine(client, upstream="http://native", model="m", routes=[RESPONSES])
    assert result.responses is not None
    verdict = result.responses.verdict("max_output_tokens")
    assert verdict is not None and verdict.outcome == IGNORED
    policy = Policy(parse_policy_text(render_policy(result)))
    error = apply_policy(
        policy, RESPONSES, {"model": "m", "input": "x", "max_output_tokens": 3}
    ).error
    assert error is not None and error.param == "max_output_tokens"
