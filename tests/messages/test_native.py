"""Native mode over HTTP, in front of a mocked engine that serves /v1/messages itself: the
request forwarded as the client sent it (path, ?beta=true, the anthropic-* headers), and
the deviations the answer itself tells mended exactly, whole and streamed, as measured on
llama.cpp's server (a chatcmpl- id; end_turn with the stop sequence that matched)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.anthropic import (
    ANTHROPIC_VERSION,
    COUNT_PATH,
    MESSAGES_PATH,
    ONE_TEXT_BLOCK,
    anthropic_error,
    anthropic_event,
    anthropic_events,
    messages_request,
    post_through,
)
from tests.support.gateways import MockEngine, Recorder

pytestmark = pytest.mark.anyio
NATIVE: dict[tuple[str, ...], Any] = {("upstream", "messages"): "native"}
HEADERS = {**ANTHROPIC_VERSION, "anthropic-beta": "interleaved-thinking-2025-05-14,x-y-2026-01-01"}
# llama.cpp's server's answer to a request whose stop sequence matched.
LLAMA = {
    "id": "chatcmpl-abc",
    "type": "message",
    "role": "assistant",
    "model": "gemma",
    "content": [{"type": "text", "text": "one two "}],
    "stop_reason": "end_turn",
    "stop_sequence": "END",
    "usage": {"input_tokens": 9, "output_tokens": 3, "cache_read_input_tokens": 4},
}


STREAM = [
    anthropic_event(
        "message_start",
        message={
            **LLAMA,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 9, "output_tokens": 0},
        },
    ),
    anthropic_event("ping"),
    anthropic_event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    anthropic_event(
        "content_block_delta", index=0, delta={"type": "text_delta", "text": "one two "}
    ),
    anthropic_event("content_block_stop", index=0),
    anthropic_event(
        "message_delta",
        delta={"stop_reason": "end_turn", "stop_sequence": "END"},
        usage={"output_tokens": 3},
    ),
    anthropic_event("message_stop"),
]


async def call(path: str, body: Any, handler: Any) -> tuple[httpx.Response, MockEngine, Recorder]:
    engine = MockEngine(handler)
    response, recorder = await post_through(path, body, engine, headers=HEADERS, overrides=NATIVE)
    return response, engine, recorder


async def test_the_request_goes_as_the_client_sent_it_and_the_answer_is_mended() -> None:
    body = messages_request(stop_sequences=["END"])
    response, engine, recorder = await call(
        MESSAGES_PATH + "?beta=true", body, lambda r: httpx.Response(200, json=LLAMA)
    )
    assert response.status_code == 200, response.text
    (sent,) = engine.requests
    assert sent.url.path == MESSAGES_PATH and sent.url.query == b"beta=true"
    assert json.loads(sent.content) == body
    # Forwarded verbatim: the engine's Messages route reads them.
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == HEADERS["anthropic-beta"]
    message = response.json()
    assert message["id"].startswith("msg_01")
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "END")
    assert message["content"] == LLAMA["content"]
    assert response.headers["request-id"]
    usage = recorder.finished_exchanges[0].usage
    assert usage is not None and (usage.prompt, usage.completion) == (13, 3)


async def test_an_answer_with_nothing_to_mend_is_the_engines_own_bytes() -> None:
    right = {**LLAMA, "id": "msg_01abc", "stop_reason": "stop_sequence"}
    data = json.dumps(right, indent=1).encode()
    response, _, _ = await call(
        MESSAGES_PATH,
        messages_request(),
        lambda r: httpx.Response(200, content=data, headers={"content-type": "application/json"}),
    )
    assert response.content == data


async def test_a_stream_is_relayed_event_by_event_and_mended() -> None:
    body = "".join(STREAM).encode() + b"data: [DONE]\n\n"  # an older vLLM's end, not passed on
    response, _, recorder = await call(
        MESSAGES_PATH,
        messages_request(stream=True),
        lambda r: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}),
    )
    events = anthropic_events(response.content)
    assert [n for n, _ in events] == ONE_TEXT_BLOCK
    assert events[0][1]["message"]["id"].startswith("msg_01")
    assert events[5][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    usage = recorder.finished_exchanges[0].usage
    assert usage is not None and (usage.prompt, usage.completion) == (9, 3)


async def test_a_stream_cut_before_message_stop_ends_with_an_error_anthropic_event() -> None:
    body = "".join(STREAM[:4]).encode()
    response, _, recorder = await call(
        MESSAGES_PATH,
        messages_request(stream=True),
        lambda r: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}),
    )
    name, data = anthropic_events(response.content)[-1]
    assert name == "error" and data["error"]["type"] == "api_error"
    assert recorder.finished_exchanges[0].error_code == "upstream_protocol_error"


async def test_the_engines_errors_are_anthropics_and_the_policy_still_refuses_first() -> None:
    vllm = {
        "object": "error",
        "message": "max_tokens is too large",
        "type": "BadRequestError",
        "code": 400,
    }
    response, _, _ = await call(
        MESSAGES_PATH, messages_request(), lambda r: httpx.Response(400, json=vllm)
    )
    assert anthropic_error(response, 400, "invalid_request_error") == "max_tokens is too large"
    refused, engine, _ = await call(
        MESSAGES_PATH,
        messages_request(tools=[{"name": "x", "input_schema": {}}]),
        lambda r: httpx.Response(200, json=LLAMA),
    )
    assert anthropic_error(refused, 400, "invalid_request_error").startswith("tools: ")
    assert engine.requests == []


async def test_count_tokens_is_the_engines_own() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    response, engine, recorder = await call(
        COUNT_PATH, body, lambda r: httpx.Response(200, json={"input_tokens": 7})
    )
    assert response.json() == {"input_tokens": 7}
    assert engine.requests[0].url.path == COUNT_PATH
    usage = recorder.finished_exchanges[0].usage
    assert usage is not None and usage.total == 0  # no model ran: nothing metered
