"""The Messages API's routes over HTTP, in front of a mocked engine: what the engine gets in
translate mode, Anthropic's answer and its request-id, and Anthropic's errors for what
the gateway answers itself (the policy, a key, a body too large, a limit, queue shedding,
an engine that failed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.messages.call import MessagesCall
from gateway.messages.route import TranslatedMessages
from tests.support.anthropic import (
    ANTHROPIC_VERSION,
    COUNT_PATH,
    MESSAGES_PATH,
    anthropic_error,
    anthropic_events,
    messages_request,
    post_through,
)
from tests.support.bodies import CHAT, MODEL, completion, sse
from tests.support.gateways import MockEngine, Recorder, asgi_client, gateway_settings
from tests.support.heldengine import HeldEngine, arrivals
from tests.support.limits import auth, limited_settings
from tests.support.meteredengine import MeteredEngine
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
CLAUDE_CODE = {
    **ANTHROPIC_VERSION,
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "x-api-key": "sk-ant-test",
}


async def post(
    path: str,
    body: Any,
    engine: MockEngine | None = None,
    overrides: dict[tuple[str, ...], Any] | None = None,
) -> tuple[httpx.Response, MockEngine, Recorder]:
    engine = engine or MockEngine()
    response, recorder = await post_through(
        path, body, engine, headers=CLAUDE_CODE, overrides=overrides
    )
    return response, engine, recorder


async def test_translate_mode_sends_the_engine_a_chat_request() -> None:
    body = messages_request(system="Be brief.", temperature=0.5, stop_sequences=["END"])
    response, engine, _ = await post(MESSAGES_PATH + "?beta=true", body)
    assert response.status_code == 200, response.text
    (sent,) = engine.requests
    # Claude Code's ?beta=true is the Messages API's: the chat route gets no query.
    assert sent.url.path == CHAT and sent.url.query == b""
    assert "x-api-key" not in sent.headers and "authorization" not in sent.headers
    assert json.loads(sent.content) == {
        "model": MODEL,
        "max_tokens": 64,
        "temperature": 0.5,
        "chat_template_kwargs": {"enable_thinking": False},
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    }


async def test_the_answer_is_anthropics_with_its_request_id() -> None:
    response, _, recorder = await post(MESSAGES_PATH, messages_request())
    assert response.status_code == 200
    message = response.json()
    assert message["id"].startswith("msg_01") and message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": "Hello"}]
    assert message["usage"] == {"input_tokens": 1, "output_tokens": 1}
    (exchange,) = recorder.finished_exchanges
    assert response.headers["request-id"] == response.headers["x-request-id"] == exchange.request_id
    assert exchange.route == MESSAGES_PATH and exchange.usage is not None
    assert (exchange.usage.prompt, exchange.usage.completion) == (1, 1)


async def test_a_stream_is_anthropics_event_sequence() -> None:
    chunks = [
        sse({"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}),
        sse({"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}),
        sse({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}),
        b"data: [DONE]\n\n",
    ]

    def streamed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=b"".join(chunks), headers={"content-type": "text/event-stream"}
        )

    response, engine, _ = await post(
        MESSAGES_PATH, messages_request(stream=True), MockEngine(streamed)
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"]
    assert json.loads(engine.requests[0].content)["stream_options"] == {"include_usage": True}
    events = anthropic_events(response.content)
    assert [n for n, _ in events][-2:] == ["message_delta", "message_stop"]
    assert events[-2][1]["usage"] == {"input_tokens": 4, "output_tokens": 2}


async def test_count_tokens_is_the_engines_count_of_the_prompt() -> None:
    def counted(request: httpx.Request) -> httpx.Response:
        answer = completion("x")
        answer["usage"] = {"prompt_tokens": 17, "completion_tokens": 1, "total_tokens": 18}
        return httpx.Response(200, json=answer)

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "system": "Be brief."}
    response, engine, _ = await post(COUNT_PATH, body, MockEngine(counted))
    assert response.status_code == 200
    assert response.json() == {"input_tokens": 17}
    assert response.headers["request-id"]
    sent = json.loads(engine.requests[0].content)
    assert sent["max_tokens"] == 1 and engine.requests[0].url.path == CHAT


async def test_a_field_the_engine_would_ignore_is_anthropics_400_naming_it() -> None:
    body = messages_request(
        messages=[
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "https://x/c.png"}}],
            }
        ]
    )
    response, engine, _ = await post(MESSAGES_PATH, body)
    message = anthropic_error(response, 400, "invalid_request_error")
    assert message.startswith("messages.0.content.0.type: ")
    assert "text-only model" in message
    assert engine.requests == []


async def test_an_unknown_field_is_a_400_naming_it() -> None:
    response, engine, _ = await post(
        MESSAGES_PATH, messages_request(fallbacks=[{"model": "claude-opus-4-8"}])
    )
    assert anthropic_error(response, 400, "invalid_request_error").startswith("fallbacks: ")
    assert engine.requests == []


async def test_a_malformed_body_is_anthropics_400() -> None:
    app = create_app(gateway_settings(), transport=MockEngine().transport)
    async with asgi_client(app) as client:
        response = await client.post(MESSAGES_PATH, content=b"{not json", headers=CLAUDE_CODE)
    anthropic_error(response, 400, "invalid_request_error")


async def test_a_body_too_large_is_anthropics_413() -> None:
    body = messages_request(messages=[{"role": "user", "content": "x" * 5000}])
    response, engine, _ = await post(
        MESSAGES_PATH, body, overrides={("limits", "max_body_bytes"): 1024}
    )
    anthropic_error(response, 413, "request_too_large")
    assert engine.requests == []


@pytest.mark.parametrize(
    ("status", "answer", "expected", "kind"),
    [
        (
            400,
            {"error": {"message": "prompt is too long", "type": "invalid_request_error"}},
            400,
            "invalid_request_error",
        ),
        (
            404,
            {"error": {"message": "no such model", "type": "not_found_error"}},
            404,
            "not_found_error",
        ),
        (500, {"error": {"message": "Traceback (most recent call last): ..."}}, 500, "api_error"),
        (503, {"error": {"message": "busy"}}, 529, "overloaded_error"),
    ],
)
async def test_an_engine_error_is_relayed_in_anthropics_shape(
    status: int, answer: Any, expected: int, kind: str
) -> None:
    engine = MockEngine(lambda request: httpx.Response(status, json=answer))
    response, _, _ = await post(MESSAGES_PATH, messages_request(), engine)
    message = anthropic_error(response, expected, kind)
    assert "Traceback" not in message


async def test_a_wrong_key_is_anthropics_401(tmp_path: Path) -> None:
    settings = limited_settings("http://127.0.0.1:9", tmp_path, {})
    app = create_app(settings, transport=MockEngine().transport)
    async with asgi_client(app) as client:
        wrong = await client.post(
            MESSAGES_PATH, json=messages_request(), headers={"x-api-key": "sk-no"}
        )
        right = await client.post(
            MESSAGES_PATH,
            json=messages_request(),
            headers={"x-api-key": auth("alice")["Authorization"][7:]},
        )
    anthropic_error(wrong, 401, "authentication_error")
    assert right.status_code == 200, right.text


async def test_a_limit_is_anthropics_429_with_retry_after(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with running_server(engine) as engine_url:
        settings = limited_settings(engine_url, tmp_path, {"default": {"requests_per_minute": 1}})
        app = create_app(settings)
        async with asgi_client(app) as client:
            answers = [
                await client.post(
                    MESSAGES_PATH, json=messages_request(max_tokens=2), headers=auth("alice")
                )
                for _ in range(2)
            ]
    assert answers[0].status_code == 200, answers[0].text
    anthropic_error(answers[1], 429, "rate_limit_error")
    assert int(answers[1].headers["retry-after"]) >= 1


async def test_a_shed_request_is_anthropics_529() -> None:
    # One request in flight and no queue: the second is shed at once, as the queue would
    # shed it at its time-out.
    changed = asyncio.Condition()
    engine = HeldEngine(changed)
    env = {"FT_GATEWAY_UPSTREAM__MAX_IN_FLIGHT": "1", "FT_GATEWAY_UPSTREAM__QUEUE__SIZE": "0"}
    async with running_server(engine.app) as engine_url:
        app = create_app(gateway_settings(engine_url, environ=env))
        async with (
            running_server(app) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as client,
        ):
            first = asyncio.create_task(client.post(MESSAGES_PATH, json=messages_request()))
            await arrivals([engine], 1)
            shed = await client.post(MESSAGES_PATH, json=messages_request())
            engine.release()
            held = await first
    assert held.status_code == 200, held.text
    anthropic_error(shed, 529, "overloaded_error")
    assert shed.headers["retry-after"]


async def _no_send(message: Any) -> None:
    raise AssertionError("nothing is sent while a request is prepared")


@pytest.mark.parametrize(
    ("fields", "source"),
    [
        ({"metadata": {"user_id": "user-1"}}, "prompt_cache_key"),  # Claude Code's session
        ({"system": "Be brief."}, "content"),
    ],
)
async def test_affinity_keys_by_the_user_or_the_conversation_the_engine_reads(
    fields: dict[str, Any], source: str
) -> None:
    settings = gateway_settings(overrides={("upstream", "routing"): "affinity"})
    state = create_app(settings, transport=MockEngine().transport).state.gateway
    route = TranslatedMessages(state)
    scope = {"headers": [], "method": "POST", "path": MESSAGES_PATH}
    keys = []
    for system in ("One system prompt.", "Another."):
        call = MessagesCall(MESSAGES_PATH, scope, _no_send)
        route.translate(call, messages_request(**fields) | {"system": system})
        assert call.hint.source == source
        keys.append(call.hint.key)
    # The system prompt is the conversation's head: it keys the content, not the user.
    assert (keys[0] == keys[1]) == (source == "prompt_cache_key")
