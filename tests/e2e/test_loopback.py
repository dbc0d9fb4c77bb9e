"""The whole gateway over real sockets: openai SDK -> uvicorn -> gateway -> loopback engine,
over each upstream client."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import openai
import pytest

from tests.support.bodies import ANSWER, MESSAGES, MODEL, chunk_event
from tests.support.engine import (
    FakeEngine,
    sends_json,
    sends_when,
    stalls_after,
    stream_end,
    stream_start,
)
from tests.support.faults import refused_url
from tests.support.gateways import gateway_in_front_of
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def gateway(engine_url: str, upstream_client: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """The gateway in front of ``engine_url`` on a loopback port, and an SDK client for it."""
    async with gateway_in_front_of(engine_url, client=upstream_client) as url, sdk(url) as client:
        yield client


async def test_chat_answer_through_the_sdk(upstream_client: str) -> None:
    async with FakeEngine(sends_json(ANSWER)) as engine:
        async with gateway(engine.url, upstream_client) as client:
            completion = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, seed=3
            )
            assert completion.choices[0].message.content == "Hello"
            with pytest.raises(openai.BadRequestError, match="logprobs"):
                await client.chat.completions.create(model=MODEL, messages=MESSAGES, logprobs=True)
    (seen,) = engine.requests
    assert json.loads(seen.body)["seed"] == 3
    assert seen.header(b"authorization") is None


async def test_stream_is_relayed_chunk_by_chunk(upstream_client: str) -> None:
    received = asyncio.Event()
    first, rest = stream_start(chunk_event("Hel")), stream_end(chunk_event("lo", finish="stop"))
    async with FakeEngine(sends_when(first, rest, received)) as engine:
        async with gateway(engine.url, upstream_client) as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, stream=True
            )
            parts = []
            async for event in stream:
                parts.append(event.choices[0].delta.content)
                received.set()  # the engine sends the rest only after the first arrived
            assert parts == ["Hel", "lo"]


async def test_client_leaving_a_stream_closes_the_engine_connection(
    upstream_client: str,
) -> None:
    async with FakeEngine(stalls_after(stream_start(chunk_event("Hel")))) as engine:
        async with gateway(engine.url, upstream_client) as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, stream=True
            )
            first = await anext(aiter(stream))
            assert first.choices[0].delta.content == "Hel"
            await stream.close()
            await engine.connection_closed.wait()
    assert engine.closed_connections == 1


async def test_engine_down_is_a_502_naming_it(upstream_client: str) -> None:
    async with gateway(refused_url(), upstream_client) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert caught.value.status_code == 502
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "upstream_unreachable"


async def test_models_pass_through(upstream_client: str) -> None:
    models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "x"}]}
    async with FakeEngine(sends_json(models)) as engine:
        async with gateway(engine.url, upstream_client) as client:
            assert [m.id async for m in client.models.list()] == [MODEL]
    assert engine.requests[0].method == "GET"
