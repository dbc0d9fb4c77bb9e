"""``n`` served by fan-out through the app against a mocked engine (httpx.MockTransport
via the factory): n engine requests merged into one answer, and what the client gets
when one of the n fails (its status, a 502, one error event). The pure merges are in
test_fanout.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.proxy.fanout import derive_seed
from gateway.settings import Settings
from tests.support.bodies import (
    CHAT,
    COMPLETIONS,
    DONE,
    MODEL,
    chat,
    completion,
    error_event,
    openai_error,
    sse,
)
from tests.support.gateways import MockEngine, Recorder, asgi_client, gateway_settings
from tests.support.requestids import choice_id, choice_index, engine_id
from tests.support.streamchunks import chunk, payloads, usage_chunk


@pytest.fixture
def settings() -> Settings:
    return gateway_settings(
        environ={
            "FT_GATEWAY_LIMITS__MAX_STREAM_BYTES": "4096",
            "FT_GATEWAY_LIMITS__MAX_RESPONSE_BYTES": "4096",
        }
    )


@pytest.fixture
async def client(
    settings: Settings, engine: MockEngine, recorder: Recorder
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, transport=engine.transport)
    app.state.gateway.observer = recorder
    async with asgi_client(app) as c:
        c.headers["x-request-id"] = "fan"  # what sub_index tells the choices apart by
        yield c


def sub_index(request: httpx.Request) -> int:
    """Which choice an engine request is for, by the UUID the gateway derives for choice i
    from the client's request id (which the request carries as X-Client-Request-ID)."""
    sent = request.headers["x-request-id"].encode()
    return choice_index(sent, request.headers["x-client-request-id"])


def by_choice(engine: MockEngine) -> dict[int, dict[str, Any]]:
    return {sub_index(r): json.loads(r.content) for r in engine.requests}


@pytest.mark.anyio
@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
async def test_n_gets_n_engine_requests_merged_into_one_answer(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, route: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        i = sub_index(request)
        if route == COMPLETIONS:
            choice = {"index": 0, "text": f"text {i}", "logprobs": None, "finish_reason": "stop"}
            body = {"id": f"cmpl-{i}", "object": "text_completion", "created": 7, "model": MODEL}
            body |= {"choices": [choice]}
        else:
            body = completion(f"text {i}")
            body["id"] = f"chatcmpl-{i}"
            body["system_fingerprint"] = f"fp-{i}"
        usage = {"prompt_tokens": 11, "completion_tokens": i + 1, "total_tokens": 12 + i}
        headers = {"retry-after": str(i + 1), "x-engine": f"replica-{i}"}
        return httpx.Response(200, json={**body, "usage": usage}, headers=headers)

    engine.handler = handler
    request = chat(n=3, seed=1234) if route == CHAT else {"model": MODEL, "prompt": "p", "n": 3}
    response = await client.post(route, json=request, headers={"x-request-id": "req-7"})
    assert response.status_code == 200
    merged = response.json()
    assert response.headers["x-request-id"] == "req-7"
    assert response.headers["retry-after"] == "1"  # the first answer's (relayed) headers
    assert "x-engine" not in response.headers  # an engine's own: never relayed
    prefix = "chatcmpl" if route == CHAT else "cmpl"
    assert merged["id"] == f"{prefix}-0"
    assert [c["index"] for c in merged["choices"]] == [0, 1, 2]
    choices = merged["choices"]
    texts = [c["text"] if route == COMPLETIONS else c["message"]["content"] for c in choices]
    assert texts == ["text 0", "text 1", "text 2"]
    assert merged["usage"] == {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}
    if route == CHAT:
        assert merged["system_fingerprint"] == "fp-0"

    sent_ids = sorted(r.headers["x-request-id"].encode() for r in engine.requests)
    assert sent_ids == sorted(choice_id(engine_id("req-7"), i) for i in range(3))
    assert {r.headers["x-client-request-id"] for r in engine.requests} == {"req-7"}
    sent = by_choice(engine)
    assert all("n" not in body for body in sent.values())
    if route == CHAT:
        assert [sent[i]["seed"] for i in range(3)] == [derive_seed(1234, i) for i in range(3)]
    else:
        assert all("seed" not in body for body in sent.values())
    (exchange,) = recorder.finished_exchanges
    assert exchange.upstream_status == 200 and exchange.status == 200
    assert [(o.field, o.action) for o in exchange.outcomes] == [("n", "fanout")]


@pytest.mark.anyio
async def test_n_one_is_a_single_request_with_n(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    response = await client.post(CHAT, json=chat(n=1), headers={"x-request-id": "one"})
    assert len(response.json()["choices"]) == 1
    (request,) = engine.requests
    assert request.headers["x-request-id"] == engine_id("one")
    assert json.loads(request.content)["n"] == 1


SSE = "text/event-stream"


def failing(bad: int, status: int, body: Any, *, stream: bool = False) -> Any:
    """An engine's handler under which choice ``bad`` fails with ``status`` and ``body``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == bad:
            if isinstance(body, bytes):
                return httpx.Response(status, content=body, headers={"content-type": "text/html"})
            return httpx.Response(status, json=body)
        if stream:
            events = sse(chunk()) + DONE
            return httpx.Response(200, content=events, headers={"content-type": SSE})
        return httpx.Response(200, json=completion("fine"))

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_engine_500_in_one_is_that_status_and_nothing_merged(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, stream: bool
) -> None:
    engine.handler = failing(1, 500, b"<html>Traceback /srv/engine.py</html>", stream=stream)
    response = await client.post(CHAT, json=chat(n=3, stream=stream))
    openai_error(response, 500, code="upstream_error", type="upstream_error")
    assert "fine" not in response.text and "Traceback" not in response.text
    assert recorder.finished_exchanges[-1].upstream_status == 500


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_engine_400_in_one_is_that_400(
    client: httpx.AsyncClient, engine: MockEngine, stream: bool
) -> None:
    vllm = {"error": {"message": "prompt too long", "type": "BadRequestError", "code": 400}}
    engine.handler = failing(2, 400, vllm, stream=stream)
    response = await client.post(CHAT, json=chat(n=3, stream=stream))
    openai_error(response, 400, message="prompt too long", code=None)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
    ],
)
async def test_a_failed_engine_request_is_its_error_status(
    client: httpx.AsyncClient, engine: MockEngine, exc: Exception, status: int, code: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == 0:
            raise exc
        return httpx.Response(200, json=completion())

    engine.handler = handler
    openai_error(await client.post(CHAT, json=chat(n=2)), status, code=code)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad",
    [b'{"id": "chatcmpl-1", "choi', b'{"id": "chatcmpl-1", "object": "chat.completion"}'],
)
async def test_a_malformed_answer_in_one_is_a_502(
    client: httpx.AsyncClient, engine: MockEngine, bad: bytes
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == 1:
            return httpx.Response(200, content=bad, headers={"content-type": "application/json"})
        return httpx.Response(200, json=completion())

    engine.handler = handler
    openai_error(await client.post(CHAT, json=chat(n=3)), 502, code="upstream_protocol_error")


@pytest.mark.anyio
async def test_an_answer_past_the_size_limit_in_one_is_a_502(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=completion("x" * 5000 if sub_index(request) else "ok"))

    engine.handler = handler
    response = await client.post(CHAT, json=chat(n=2))
    error = openai_error(response, 502, code="upstream_protocol_error")
    assert "larger than the gateway's limit" in error["message"]


def streaming(events: dict[int, bytes]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        body = events[sub_index(request)]
        return httpx.Response(200, content=body, headers={"content-type": SSE})

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize("include_usage", [True, False])
async def test_merged_stream_ends_once_with_usage_only_when_asked(
    client: httpx.AsyncClient, engine: MockEngine, include_usage: bool
) -> None:
    def stream(i: int) -> bytes:
        chunks = [sse(chunk(id=f"c{i}", text=f"{i}")), sse(chunk(id=f"c{i}", finish="stop"))]
        if include_usage:
            chunks.append(sse(usage_chunk(f"c{i}", i + 1)))
        return b"".join(chunks) + DONE

    engine.handler = streaming({i: stream(i) for i in range(3)})
    body = chat(n=3, stream=True)
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    response = await client.post(CHAT, json=body)
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    events = payloads(response.content)
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    usage_chunks = [c for c in chunks if c["choices"] == []]
    if include_usage:
        assert usage_chunks == [chunks[-1]]
        assert chunks[-1]["usage"] == {
            "prompt_tokens": 5,
            "completion_tokens": 6,
            "total_tokens": 11,
        }
    else:
        assert usage_chunks == []
    assert len({c["id"] for c in chunks}) == 1
    assert sorted(c["choices"][0]["index"] for c in chunks if c["choices"]) == [0, 0, 1, 1, 2, 2]
    assert all("usage" not in c for c in chunks if c["choices"])
    sent = [json.loads(r.content) for r in engine.requests]
    assert all(b["stream_options"] == body.get("stream_options") for b in sent if include_usage)


BROKEN_STREAMS = [
    # (what choice 1's stream does, the error event's code)
    (sse(chunk()) + b"data: {not json\n\n" + DONE, "upstream_protocol_error"),
    (sse(chunk()), "upstream_protocol_error"),  # ends without [DONE]
    (sse(chunk()) + sse({"error": {"message": "oom", "code": 500}}), "upstream_error"),
    (sse(chunk(text="x" * 5000)) + DONE, "upstream_protocol_error"),  # past the limit
]


@pytest.mark.anyio
@pytest.mark.parametrize(("broken", "code"), BROKEN_STREAMS)
async def test_one_broken_stream_ends_the_answer_with_one_error_event(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, broken: bytes, code: str
) -> None:
    fine = sse(chunk(text="y" * 1000)) + DONE
    engine.handler = streaming({0: fine, 1: broken, 2: fine})
    response = await client.post(CHAT, json=chat(n=3, stream=True))
    assert response.status_code == 200
    assert error_event(response.text)["code"] == code
    assert response.text.count("data: [DONE]") == 1
    assert recorder.finished_exchanges[-1].error_code == code


@pytest.mark.anyio
async def test_the_size_limit_counts_all_n_streams(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    # Each stream alone is within the 4096 bytes of the settings; the three are not.
    engine.handler = streaming({i: sse(chunk(text="z" * 1500)) + DONE for i in range(3)})
    response = await client.post(CHAT, json=chat(n=3, stream=True))
    assert "larger than the limit" in error_event(response.text)["message"]
