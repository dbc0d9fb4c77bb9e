"""The whole gateway over real sockets: openai SDK -> uvicorn -> gateway -> loopback engine,
over each upstream client."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import openai
import pytest

from gateway.app.factory import create_app
from gateway.settings import load_settings
from tests.support.engine import (
    LAST_CHUNK,
    STREAM_HEAD,
    FakeEngine,
    Seen,
    Wire,
    chunk,
    http_response,
)
from tests.support.faults import refused_url
from tests.support.paths import ROOT
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
MODEL = "Qwen3.8-Flash-Next"
ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def sse(content: str, *, finish: str | None = None) -> bytes:
    event = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


@contextlib.asynccontextmanager
async def gateway(engine_url: str, upstream_client: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """The gateway in front of ``engine_url`` on a loopback port, and an SDK client for it."""
    settings = load_settings(
        None,
        overrides={
            ("upstream", "url"): engine_url,
            ("upstream", "client"): upstream_client,
            ("policy",): str(ROOT / "policies" / "ft-serve.yaml"),
        },
        environ={},
    )
    async with running_server(create_app(settings)) as url:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
            yield client


async def test_chat_answer_through_the_sdk(upstream_client: str) -> None:
    async def engine_answers(request: Seen, wire: Wire) -> None:
        body = json.dumps(ANSWER).encode()
        await wire.send(http_response(200, body, headers=[(b"Content-Type", b"application/json")]))

    async with FakeEngine(engine_answers) as engine:
        async with gateway(engine.url, upstream_client) as client:
            completion = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], seed=3
            )
            assert completion.choices[0].message.content == "Hello"
            with pytest.raises(openai.BadRequestError, match="logprobs"):
                await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}], logprobs=True
                )
    (seen,) = engine.requests
    assert json.loads(seen.body)["seed"] == 3
    assert seen.header(b"authorization") is None


async def test_stream_is_relayed_chunk_by_chunk(upstream_client: str) -> None:
    received = asyncio.Event()

    async def engine_streams(request: Seen, wire: Wire) -> None:
        await wire.send(STREAM_HEAD + chunk(sse("Hel")))
        await received.wait()
        await wire.send(chunk(sse("lo", finish="stop")) + chunk(b"data: [DONE]\n\n") + LAST_CHUNK)

    async with FakeEngine(engine_streams) as engine:
        async with gateway(engine.url, upstream_client) as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            parts = []
            async for event in stream:
                parts.append(event.choices[0].delta.content)
                received.set()  # the engine sends the rest only after the first arrived
            assert parts == ["Hel", "lo"]


async def test_client_leaving_a_stream_closes_the_engine_connection(
    upstream_client: str,
) -> None:
    async def engine_streams(request: Seen, wire: Wire) -> None:
        await wire.send(STREAM_HEAD + chunk(sse("Hel")))
        await wire.until_client_leaves()

    async with FakeEngine(engine_streams) as engine:
        async with gateway(engine.url, upstream_client) as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            first = await anext(aiter(stream))
            assert first.choices[0].delta.content == "Hel"
            await stream.close()
            await engine.connection_closed.wait()
    assert engine.closed_connections == 1


async def test_engine_down_is_a_502_naming_it(upstream_client: str) -> None:
    async with gateway(refused_url(), upstream_client) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.status_code == 502
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "upstream_unreachable"


async def test_models_pass_through(upstream_client: str) -> None:
    models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "x"}]}

    async def engine_lists(request: Seen, wire: Wire) -> None:
        body = json.dumps(models).encode()
        await wire.send(http_response(200, body, headers=[(b"content-type", b"application/json")]))

    async with FakeEngine(engine_lists) as engine:
        async with gateway(engine.url, upstream_client) as client:
            assert [m.id async for m in client.models.list()] == [MODEL]
    assert engine.requests[0].method == "GET"
