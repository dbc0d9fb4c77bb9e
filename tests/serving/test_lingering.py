"""An early answer to a client still sending its body: every client reads the 413.

Python's urllib (and requests) send the whole body before reading, with
``Connection: close``; without a lingering close the server's close with the
body unread makes the kernel reset the connection, and the client sees a broken
pipe instead of the 413. The gateway reads and drops the rest for a bounded time
and size, as nginx does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
import pytest

from gateway.serving.server import guarded_protocol
from gateway.settings import Settings
from tests.support.bodies import CHAT, chat
from tests.support.gateways import Gateway, gateway_settings, serve_gateway

pytestmark = pytest.mark.anyio
LIMIT = 64 * 1024


def _settings() -> Settings:
    # No engine is needed: every request here is refused before it is forwarded.
    return gateway_settings("http://127.0.0.1:9", overrides={("limits", "max_body_bytes"): LIMIT})


@contextlib.asynccontextmanager
async def _gateway(**protocol: float) -> AsyncIterator[Gateway]:
    settings = _settings()
    server = settings.server
    http = guarded_protocol(
        max_head_bytes=server.max_header_bytes, head_timeout=server.header_timeout
    )
    if protocol:
        http = type("Lingering", (http,), protocol)
    async with serve_gateway(settings, http=http) as gateway:
        yield gateway


def _post_with_urllib(url: str, size: int) -> tuple[int, dict[str, object]]:
    body = orjson.dumps(chat(messages=[{"role": "user", "content": "x" * size}]))
    request = urllib.request.Request(
        url + CHAT, data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, orjson.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


@pytest.mark.parametrize("size", [4 * LIMIT, 64 * LIMIT])
async def test_urllib_sending_too_much_reads_the_413(size: int) -> None:
    async with _gateway() as gateway:
        status, body = await anyio.to_thread.run_sync(_post_with_urllib, gateway.url, size)
    assert status == 413
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "request_too_large"


async def _send_until_closed(url: str, *, chunk: bytes, most: int) -> tuple[bytes, int]:
    """Declare a huge body, read the answer, then keep sending; the answer, and the
    bytes sent before the gateway closed (at most ``most``)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST {CHAT} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
        f"connection: close\r\ncontent-length: {most * 10}\r\n\r\n"
    ).encode()
    writer.write(head)
    answer = await reader.readuntil(b"\r\n\r\n")
    sent = 0
    with contextlib.suppress(ConnectionError):
        while sent < most:
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return answer, sent


async def test_the_linger_is_bounded_in_size() -> None:
    # A client that never stops sending is cut off once it has sent the bound.
    bound = 256 * 1024
    async with _gateway(body_linger_bytes=bound, body_linger=30.0) as gateway:
        answer, sent = await _send_until_closed(gateway.url, chunk=b"x" * 16384, most=100 * bound)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert sent < 100 * bound


async def test_the_linger_is_bounded_in_time() -> None:
    # A client that trickles its body is cut off after body_linger seconds.
    async with _gateway(body_linger=0.2) as gateway:
        host, port = gateway.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            (
                f"POST {CHAT} HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n"
                f"content-type: application/json\r\ncontent-length: {10 * LIMIT}\r\n\r\n"
            ).encode()
        )
        answer = await reader.read(4096)
        assert answer.startswith(b"HTTP/1.1 413 ")
        # The client now sends nothing more: the gateway closes by itself.
        with anyio.fail_after(10):
            rest = await reader.read()
        writer.close()
    assert rest == b""


async def test_a_keep_alive_client_keeps_its_connection() -> None:
    # Without Connection: close, the rest of the body is read and dropped, and the
    # connection serves the next request.
    async with _gateway() as gateway:
        host, port = gateway.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        big = b"x" * (2 * LIMIT)
        for _ in range(2):
            writer.write(
                (
                    f"POST {CHAT} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(big)}\r\n\r\n"
                ).encode()
                + big
            )
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 413 ")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_a_closed_connection_leaves_no_reference_cycle() -> None:
    # The lingering transport and its protocol point at each other; the cycle is
    # broken when the connection goes, so both are freed at once, not by the cycle
    # collector (a soak showed RSS creeping up while it was not).
    lost = asyncio.Event()
    alive: list[weakref.ref[Any]] = []

    def connection_made(self: Any, transport: Any) -> None:
        alive.append(weakref.ref(self))
        base.connection_made(self, transport)

    def connection_lost(self: Any, exc: Exception | None) -> None:
        base.connection_lost(self, exc)
        lost.set()

    settings = _settings()
    base = guarded_protocol(
        max_head_bytes=settings.server.max_header_bytes,
        head_timeout=settings.server.header_timeout,
    )
    http = type(
        "Tracked", (base,), {"connection_made": connection_made, "connection_lost": connection_lost}
    )
    gc.disable()
    try:
        async with serve_gateway(settings, http=http) as gateway:
            host, port = gateway.url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 200 ")
            writer.close()
            await lost.wait()
            for _ in range(3):
                await asyncio.sleep(0)  # let the loop drop its own references
            assert [ref() for ref in alive] == [None]
    finally:
        gc.enable()
