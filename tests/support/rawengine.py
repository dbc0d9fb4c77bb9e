"""Hostile and broken engines for tests/adversarial: handlers of the raw-socket FakeEngine
(tests/support/engine.py) that write what no well-behaved engine would, byte for byte.

Each answer names the request it belongs to (the content of its first message), so a
test can tell when one client's answer reached another. Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import zlib

from tests.support.bodies import DONE, chunk_event, completion
from tests.support.engine import (
    JSON,
    LAST_CHUNK,
    STREAM_HEAD,
    FakeEngine,
    Handler,
    Seen,
    Wire,
    chunk,
    http_head,
    http_response,
)


def asked(request: Seen) -> str:
    """The content of the request's first message: what its answer names."""
    body = request.json()
    return str(body["messages"][0]["content"])


def own_answer(request: Seen) -> bytes:
    """A whole JSON chat completion whose content is what ``request`` asked."""
    return http_response(200, json.dumps(completion(asked(request))).encode(), headers=JSON)


async def answers_own(request: Seen, wire: Wire) -> None:
    """A handler: every request gets its own answer."""
    await wire.send(own_answer(request))


async def _arrives_elsewhere(engine: FakeEngine, request: Seen) -> None:
    """Return once a request arrives on another connection than ``request``'s."""
    async with engine.arrived:
        await engine.arrived.wait_for(
            lambda: any(r.connection is not request.connection for r in engine.requests)
        )


def first_then_own(first: Handler) -> Handler:
    """A handler: ``first`` answers the first request, every other gets its own answer."""
    seen: list[Seen] = []

    async def handler(request: Seen, wire: Wire) -> None:
        if seen:
            await answers_own(request, wire)
            return
        seen.append(request)
        await first(request, wire)

    return handler


def interim_first(engine: FakeEngine, interim: bytes) -> Handler:
    """A handler: the first request gets the ``interim`` response (a 1xx head) at once and
    its own answer only when the gateway sends more bytes on that connection or a request
    arrives on another one; every other request gets its own answer at once.

    A gateway that takes the interim head for the answer hands its connection back, and
    the next request on it gets the first one's answer; one that reads past it waits,
    sends the next request on another connection, and then gets its answer."""

    async def first(request: Seen, wire: Wire) -> None:
        await wire.send(interim)
        waits = [
            asyncio.ensure_future(wire.until_input()),
            asyncio.ensure_future(_arrives_elsewhere(engine, request)),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        await wire.send(own_answer(request))

    return first_then_own(first)


def surplus_first(answer: bytes, cut: int) -> Handler:
    """A handler: the first request gets its own answer and the first ``cut`` bytes of
    ``answer`` in one write (more than one answer to one request) and, if the gateway
    sends another request on that connection, the rest of ``answer``: a gateway that kept
    the connection takes that for the next request's answer. Every other request gets
    its own answer."""

    async def first(request: Seen, wire: Wire) -> None:
        await wire.send(own_answer(request) + answer[:cut])
        if await wire.until_input():
            await wire.send(answer[cut:])

    return first_then_own(first)


def closes_kept_alive(engine: FakeEngine) -> Handler:
    """A handler: the first request on each connection gets its own answer; a later one
    on the same connection finds it closed, not a byte written (llama.cpp's server closes
    a connection after a stream although its head said keep-alive: a request sent on it
    as the close comes meets this)."""

    async def handler(request: Seen, wire: Wire) -> None:
        on_this = [r for r in engine.requests if r.connection is request.connection]
        if on_this[0] is request:
            await answers_own(request, wire)
        else:
            wire.hang_up()

    return handler


def header_flood(*, line: bytes, total: int, first: bytes = b"") -> Handler:
    """A handler: a status line and ``first``, then ``line`` again and again (up to
    ``total`` bytes) and never the blank line that ends the head. ``Seen.sent`` counts
    what the gateway took before it closed the connection."""

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(b"HTTP/1.1 200 OK\r\n" + first)
        block = line * max(1, 65536 // len(line))
        with contextlib.suppress(OSError):
            while request.sent < total:
                await wire.send(block)
        await wire.until_client_leaves()

    return handler


def with_headers(headers: list[tuple[bytes, bytes]]) -> Handler:
    """A handler: every request gets its own answer, with ``headers`` in its head too."""

    async def handler(request: Seen, wire: Wire) -> None:
        body = json.dumps(completion(asked(request))).encode()
        await wire.send(http_response(200, body, headers=[*JSON, *headers]))

    return handler


def status(code: bytes) -> Handler:
    """A handler: a JSON answer under status line ``HTTP/1.1 <code> X``."""
    body = json.dumps(completion("odd status")).encode()
    head = b"HTTP/1.1 %s X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(head % (code, len(body)) + body)

    return handler


def gzip_bomb(size: int) -> bytes:
    """``size`` zero bytes, gzip-compressed (about a thousandth of that)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    parts = [compressor.compress(block) for _ in range(size >> 20)]
    parts.append(compressor.flush())
    return b"".join(parts)


def sends_gzip(data: bytes, *, stream: bool = False) -> Handler:
    """A handler: ``data`` (gzip) as the body, whole with a Content-Length, or as a
    chunked event stream."""
    kind = b"text/event-stream" if stream else b"application/json"
    headers = [(b"content-type", kind), (b"content-encoding", b"gzip")]
    if stream:
        answer = http_head(200, [*headers, (b"transfer-encoding", b"chunked")])
        answer += chunk(data) + LAST_CHUNK
    else:
        answer = http_response(200, data, headers=headers)

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(answer)

    return handler


def after_done(*, total: int) -> Handler:
    """A handler: a stream of one event and ``[DONE]``, then more events without end (up
    to ``total`` bytes), never the chunk that ends the body."""
    extra = chunk(chunk_event("after the end" * 100))

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(STREAM_HEAD + chunk(chunk_event(asked(request))) + chunk(DONE))
        with contextlib.suppress(OSError):
            while request.sent < total:
                await wire.send(extra * 16)
        await wire.until_client_leaves()

    return handler


def done_then_end_when(go: asyncio.Event) -> Handler:
    """A handler: a stream of one event and ``[DONE]`` at once; the chunk that ends the
    body only once ``go`` is set (a well-behaved engine whose last write comes late).
    A JSON request gets its own answer at once."""

    async def handler(request: Seen, wire: Wire) -> None:
        if not request.json().get("stream"):
            await answers_own(request, wire)
            return
        await wire.send(STREAM_HEAD + chunk(chunk_event(asked(request))) + chunk(DONE))
        await go.wait()
        await wire.send(LAST_CHUNK)

    return handler
