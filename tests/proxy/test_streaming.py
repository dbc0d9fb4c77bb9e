"""Streaming through real uvicorn servers on loopback: incremental relay and hang-ups."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from tests.support.bodies import CHAT, MODEL, chat, sse, sse_events
from tests.support.gateways import gateway_in_front_of
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio


@dataclass
class SteppedEngine:
    """An engine that sends one chunk per ``step`` set by the test, like a slow model,
    and notices the client leaving the way real engines do (watching ``receive``)."""

    chunks: int = 3
    steps: list[asyncio.Event] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    sent: int = 0

    def __post_init__(self) -> None:
        self.steps = [asyncio.Event() for _ in range(self.chunks)]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/v1/models":  # what it serves, asked by the gateway first
            listed = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": listed})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                for index in range(self.chunks):
                    await self.steps[index].wait()
                    await send(
                        {
                            "type": "http.response.body",
                            "body": sse({"choices": [{"delta": {"content": f"t{index}"}}]}),
                            "more_body": True,
                        }
                    )
                    self.sent += 1
                await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
                tg.cancel_scope.cancel()
        finally:
            self.closed.set()


@pytest.fixture
async def stepped() -> AsyncIterator[tuple[SteppedEngine, str]]:
    engine = SteppedEngine()
    async with running_server(engine) as engine_url, gateway_in_front_of(engine_url) as url:
        yield engine, url


BODY = chat(stream=True)


async def test_each_chunk_reaches_the_client_before_the_engine_sends_the_next(
    stepped: tuple[SteppedEngine, str],
) -> None:
    engine, url = stepped
    received: list[bytes] = []
    with anyio.fail_after(10):
        async with httpx.AsyncClient(base_url=url) as client:
            async with client.stream("POST", CHAT, json=BODY) as response:
                assert response.headers["x-accel-buffering"] == "no"
                engine.steps[0].set()
                async for chunk in response.aiter_raw():
                    received.append(chunk)
                    # The engine has sent exactly what we have seen: nothing is held back.
                    if engine.sent < engine.chunks:
                        assert engine.sent == len(received)
                        engine.steps[engine.sent].set()
    assert sse_events(b"".join(received))[-1] == "data: [DONE]"
    assert len(received) >= engine.chunks


async def test_client_hang_up_closes_the_engine_request(
    stepped: tuple[SteppedEngine, str],
) -> None:
    engine, url = stepped
    with anyio.fail_after(10):
        async with httpx.AsyncClient(base_url=url) as client:
            async with client.stream("POST", CHAT, json=BODY) as response:
                engine.steps[0].set()
                async for _chunk in response.aiter_raw():
                    break  # read one chunk, then hang up
        # The engine is blocked waiting for step 1: only the gateway closing the
        # upstream connection can end its request.
        await engine.closed.wait()
    assert engine.sent == 1


async def test_client_hang_up_while_waiting_for_headers() -> None:
    arrived = asyncio.Event()
    closed = asyncio.Event()

    async def silent_engine(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await SteppedEngine()(scope, receive, send)
            return
        arrived.set()
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            closed.set()

    async with running_server(silent_engine) as engine_url:
        async with gateway_in_front_of(engine_url) as url:
            with anyio.fail_after(10):
                async with httpx.AsyncClient(base_url=url) as client:
                    async with anyio.create_task_group() as tg:
                        body = {**BODY, "stream": False}

                        async def call() -> None:
                            await client.post(CHAT, json=body)

                        tg.start_soon(call)
                        await arrived.wait()
                        tg.cancel_scope.cancel()  # the client gives up and closes its socket
                await closed.wait()
