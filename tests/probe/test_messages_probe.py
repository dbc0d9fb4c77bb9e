"""The probe of Anthropic's Messages API: an engine without /v1/messages (the gateway
translates; the rules follow the chat route's verdicts) and engines that serve it natively,
one right and one with llama.cpp's server's deviations (thinking ignored; a matched stop
sequence said beside end_turn, which the gateway mends). Every written policy checks."""

from __future__ import annotations

import json
from typing import Any

import httpx

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.probe.client import EngineClient
from gateway.probe.report import render_markdown, render_table
from gateway.probe.route import CHAT
from gateway.probe.runner import planned_requests, probe_engine
from gateway.probe.verdict import HONOURED, IGNORED, REJECTED
from gateway.probe.writer import render_policy
from gateway.routes import COUNT_TOKENS, MESSAGES
from tests.support.probes import DAY, run_probe
from tests.support.toyengine import ToyEngine

WORDS = ["lists", "are", "mutable", "sequences", "of", "items"]
OK = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def test_an_engine_without_the_route_gets_translate_rules_from_the_chat_verdicts() -> None:
    result = run_probe(ToyEngine(ignore={"top_k"}), [CHAT, MESSAGES])
    assert result.messages is not None and not result.messages.native
    assert "HTTP 404" in result.messages.detail
    text = render_policy(result)
    assert "upstream.messages: translate" in text
    policy = Policy(parse_policy_text(text))
    assert [str(r) for r in policy.routes] == [CHAT, MESSAGES, COUNT_TOKENS]
    body = {**OK, "model": "toy", "temperature": 0.5, "stop_sequences": ["END"], "system": "x"}
    assert apply_policy(policy, MESSAGES, body).error is None
    for refused, param in (
        ({"top_k": 5}, "top_k"),  # the toy ignores it on its chat route
        ({"tools": [{"name": "x", "input_schema": {}}]}, "tools"),
        ({"thinking": {"type": "adaptive"}}, "thinking.type"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].type",
        ),
    ):
        error = apply_policy(policy, MESSAGES, {**body, **refused}).error
        assert error is not None and error.param == param, refused
    assert (
        apply_policy(policy, COUNT_TOKENS, {"model": "toy", "messages": OK["messages"]}).error
        is None
    )
    assert "not served natively" in render_table(result)
    assert "## /v1/messages" in render_markdown(result)


def native_engine(*, llama: bool = False, words: list[str] = WORDS) -> Any:
    """An engine serving /v1/messages: honest, or with llama.cpp's server's deviations;
    its answers are ``words``, as many as max_tokens allows."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == COUNT_TOKENS:
            return httpx.Response(200, json={"input_tokens": 7})
        if request.url.path != MESSAGES:
            return httpx.Response(404)
        said = words[: body.get("max_tokens", 16)]
        stop = (body.get("stop_sequences") or [None])[0]
        text = " ".join(said)
        reason = "max_tokens" if len(said) < len(words) else "end_turn"
        matched = None
        if stop is not None and stop in text:
            text, matched = text[: text.index(stop)], stop
            reason = "end_turn" if llama else "stop_sequence"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if body.get("thinking", {}).get("type") in ("enabled", "adaptive") and not llama:
            content.insert(0, {"type": "thinking", "thinking": "Hm.", "signature": "s"})
        answer = {
            "id": "chatcmpl-1" if llama else "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": content,
            "stop_reason": reason,
            "stop_sequence": matched,
            # llama.cpp's server counts the cached prompt apart, as Anthropic does.
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 4, "output_tokens": len(said)},
        }
        if body.get("stream"):
            events: list[dict[str, Any]] = [
                {"type": "message_start", "message": {**answer, "content": []}},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason},
                    "usage": {"output_tokens": 1},
                },
                {"type": "message_stop"},
            ]
            data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
            return httpx.Response(200, text=data, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=answer)

    return handler


def probed(llama: bool, words: list[str] = WORDS) -> Any:
    transport = httpx.MockTransport(native_engine(llama=llama, words=words))
    with EngineClient("http://native", transport=transport) as client:
        result = probe_engine(
            client, upstream="http://native", model="m", routes=[MESSAGES], today=DAY
        )
    assert result.requests <= planned_requests([MESSAGES])
    return result


def test_a_native_engine_is_judged_on_its_own_route() -> None:
    result = probed(llama=False)
    found = result.messages
    assert found is not None and found.native
    assert {v.field: v.outcome for v in found.verdicts} == {
        "max_tokens": HONOURED,
        "stream": HONOURED,
        "stop_sequences": HONOURED,
        "thinking": HONOURED,
        "count_tokens": HONOURED,
    }
    text = render_policy(result)
    assert "upstream.messages: native" in text
    policy = Policy(parse_policy_text(text))
    thinking = {
        **OK,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stop_sequences": ["x"],
    }
    assert apply_policy(policy, MESSAGES, thinking).error is None
    assert (
        apply_policy(policy, COUNT_TOKENS, {"model": "m", "messages": OK["messages"]}).error is None
    )
    assert "served natively" in render_table(result)


def test_llama_cpps_deviations_are_refused_or_left_to_the_mend() -> None:
    result = probed(llama=True)
    found = result.messages
    assert found is not None and found.native
    outcomes = {v.field: v.outcome for v in found.verdicts}
    assert outcomes["thinking"] == IGNORED
    # The stop sequence was matched and named; only the reason was wrong: mended.
    assert outcomes["stop_sequences"] == HONOURED
    stop = found.verdict("stop_sequences")
    assert stop is not None and "mends" in stop.summary
    policy = Policy(parse_policy_text(render_policy(result)))
    error = apply_policy(policy, MESSAGES, {**OK, "thinking": {"type": "adaptive"}}).error
    assert error is not None and error.param == "thinking.type"
    assert apply_policy(policy, MESSAGES, {**OK, "thinking": {"type": "disabled"}}).error is None
    assert apply_policy(policy, MESSAGES, {**OK, "stop_sequences": ["x"]}).error is None


def test_a_stop_sequence_is_found_in_a_small_models_markdown() -> None:
    # Gemma 3 270M's answers on llama.cpp's server: few words of letters alone.
    markdown = ["**Python**", "lists", "(`list`):", "ordered,", "mutable;", "e.g.", "`[1,", "2]`."]
    found = probed(llama=True, words=markdown).messages
    assert found is not None
    stop = found.verdict("stop_sequences")
    assert stop is not None and stop.outcome == HONOURED, stop


def test_an_engine_that_refuses_count_tokens_leaves_the_route_out() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == COUNT_TOKENS:
            return httpx.Response(404, json={"error": {"message": "not found"}})
        answer: httpx.Response = native_engine()(request)
        return answer

    with EngineClient("http://native", transport=httpx.MockTransport(handler)) as client:
        result = probe_engine(
            client, upstream="http://native", model="m", routes=[MESSAGES], today=DAY
        )
    assert result.messages is not None
    count = result.messages.verdict("count_tokens")
    assert count is not None and count.outcome == REJECTED
    policy = Policy(parse_policy_text(render_policy(result)))
    assert [str(r) for r in policy.routes] == [MESSAGES]
