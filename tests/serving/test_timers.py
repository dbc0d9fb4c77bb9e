"""The connection's two deadlines (serving/server.py): a request head's, an idle
keep-alive connection's. Each is noted as a time per request and checked by one timer
the connection keeps, armed again for what is left when it fires early; these tests
follow that timer on the server's own protocol object (the server runs in the test's
loop), and bound the deadlines from below only: load can delay a close, never bring
it forward."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.serving.server import guarded_protocol, uvicorn_options
from tests.support.gateways import gateway_settings
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
KEEP_ALIVE = 2.0
HEAD_TIMEOUT = 1.0
REQUEST = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n"
WAIT = 10.0  # for what must happen at all


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def _serving() -> AsyncIterator[tuple[str, list[Any]]]:
    made: list[Any] = []
    base = guarded_protocol(max_head_bytes=64 * 1024, head_timeout=HEAD_TIMEOUT)

    class Recorded(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:
            made.append(self)
            super().connection_made(transport)

    options = {
        **uvicorn_options(gateway_settings("http://127.0.0.1:9")),
        "http": Recorded,
        "timeout_keep_alive": KEEP_ALIVE,
    }
    async with running_server(_app, lifespan="off", **options) as url:
        yield url, made


async def _connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def _answered(reader: asyncio.StreamReader) -> None:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert await asyncio.wait_for(reader.readexactly(2), WAIT) == b"ok"


async def _until(condition: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the server's timer never fired"
        await asyncio.sleep(0.01)


async def test_an_idle_connection_closes_after_its_last_answer_not_its_first() -> None:
    async with _serving() as (url, made):
        reader, writer = await _connect(url)
        try:
            writer.write(REQUEST)
            await _answered(reader)
            (protocol,) = made
            first = protocol.timeout_keep_alive_task
            assert first is not None
            await asyncio.sleep(KEEP_ALIVE * 0.5)
            writer.write(REQUEST)
            await _answered(reader)
            answered = time.monotonic()
            # One timer for the connection, not one scheduled per answer ...
            assert protocol.timeout_keep_alive_task is first
            # ... which, due before the connection had been idle long enough, is set
            # again for the rest, and the connection stays open.
            await _until(lambda: protocol.timeout_keep_alive_task is not first)
            assert protocol.timeout_keep_alive_task is not None
            assert not protocol.transport.is_closing()
            assert await asyncio.wait_for(reader.read(), WAIT) == b""
            assert time.monotonic() - answered > KEEP_ALIVE - 0.2
        finally:
            writer.close()


async def test_a_slow_second_head_gets_its_own_full_deadline() -> None:
    async with _serving() as (url, _):
        reader, writer = await _connect(url)
        try:
            writer.write(REQUEST)
            await _answered(reader)
            # Past most of the deadline of the connection's first head (its timer's due time).
            await asyncio.sleep(HEAD_TIMEOUT * 0.6)
            writer.write(b"GET / HTTP/1.1\r\nhost: t\r\nx-slow: ")  # and then nothing
            begun = time.monotonic()
            answer = await asyncio.wait_for(reader.read(), WAIT)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert time.monotonic() - begun > HEAD_TIMEOUT - 0.2
        finally:
            writer.close()


async def test_a_closed_connection_leaves_no_timer_behind() -> None:
    async with _serving() as (url, made):
        reader, writer = await _connect(url)
        writer.write(REQUEST)
        await _answered(reader)
        writer.write(b"GET / HTTP/1.1\r\n")  # a head begun: both deadlines have timers
        (protocol,) = made
        await _until(lambda: protocol._head_since is not None)
        assert protocol._head_timer is not None and protocol.timeout_keep_alive_task is not None
        writer.close()
        await _until(lambda: protocol.parser is None)  # uvicorn's connection_lost ran
        assert protocol._head_timer is None and protocol.timeout_keep_alive_task is None
