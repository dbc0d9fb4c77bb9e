"""UpstreamClient on asyncio protocols and the httptools parser: the fastest one.

The gateway asks little of an HTTP client: one engine, HTTP/1.1, keep-alive,
a pool, raw body bytes, time-outs. A general client pays for much more on
every request (URL objects, header multidicts, cookie jars, redirect and auth
machinery, tracing hooks): aiohttp's request path alone costs the gateway
about 100 us a request, this one a fraction of that. A request is written in
one ``transport.write``; the answer is parsed by httptools (llhttp, in C) in
``data_received``, and its body reaches the reader through a small buffer with
back-pressure (the socket stops being read past ``_HIGH_WATER`` bytes).

Time-outs need no timer per chunk: a wait arms one timer only when the buffer
is empty, at the earlier of the idle limit (``stream_idle``) and, for the head
and a whole non-streaming answer, the response deadline.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import zlib
from collections.abc import AsyncIterator
from typing import cast
from urllib.parse import urlsplit

import httptools

from gateway._types import Headers
from gateway.errors import UpstreamError, UpstreamProtocolError, UpstreamTimeout
from gateway.routing.hint import NO_HINT, Hint
from gateway.settings import Settings
from gateway.upstream.answerstate import AnswerState
from gateway.upstream.base import (
    LATE,
    NO_ANSWER,
    SILENT,
    UpstreamResponse,
    connect_timed_out,
    read_limited,
    timed_out,
    too_large,
    unreachable,
)
from gateway.upstream.decoder import Decoder

_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024
# Idle pooled connections are closed after this many seconds (httpx's default),
# checked whenever the pool is used.
_KEEPALIVE_EXPIRY = 5.0


class _Connection(asyncio.Protocol):
    """A keep-alive connection to the engine; answers parsed as they arrive."""

    __slots__ = (
        "_pool",
        "transport",
        "closed",
        "paused",
        "idle_since",
        "exchange",
        "_headers",
        "_parser",
    )

    def __init__(self, pool: HttptoolsUpstream) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.paused = False
        self.idle_since = 0.0
        self.exchange: AnswerState | None = None
        self._headers: Headers = []  # the headers of the exchange under way
        self._parser = httptools.HttpResponseParser(self)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not a subclass of asyncio.Transport, but is one.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            # Bytes nobody asked for: the connection cannot be trusted any more.
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamProtocolError("The engine switched protocols."))
        except httptools.HttpParserError:
            self._fail(UpstreamProtocolError("The engine's answer is not valid HTTP."))

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool._forget(self)
        exchange = self.exchange
        if exchange is None or exchange.ended:
            return
        if exchange.head_done and exchange.until_close and exchange.failure is None:
            exchange.ended = True  # a body delimited by the end of the connection
            exchange.wake()
            return
        self._fail(UpstreamProtocolError("The engine closed the connection unexpectedly."))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))  # (the exchange's: set by send)

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        assert exchange is not None
        exchange.status = self._parser.get_status_code()
        exchange.keep_alive = self._parser.should_keep_alive()
        names = dict(exchange.headers)  # (made in C: cheaper than a loop here)
        exchange.until_close = b"content-length" not in names and not (
            b"transfer-encoding" in names
            and any(
                n == b"transfer-encoding" and b"chunked" in v.lower() for n, v in exchange.headers
            )
        )
        exchange.encoded = b"content-encoding" in names
        exchange.head_done = True
        exchange.wake()

    def on_body(self, body: bytes) -> None:
        exchange = self.exchange
        assert exchange is not None
        exchange.buffer.append(body)
        exchange.buffered += len(body)
        if exchange.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        if exchange.waiter is not None:  # (once per read: the rest of a read's chunks wait)
            exchange.wake()

    def on_message_complete(self) -> None:
        exchange = self.exchange
        assert exchange is not None
        exchange.ended = True
        exchange.wake()

    # used by the pool and the response

    def send(self, head: bytes, body: bytes) -> AnswerState:
        assert self.transport is not None
        self.exchange = exchange = AnswerState()
        self._headers = exchange.headers
        self.transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.transport.write(body)
        return exchange

    def drained(self, exchange: AnswerState) -> None:
        if self.paused and exchange.buffered < _LOW_WATER and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def _fail(self, error: UpstreamError) -> None:
        exchange = self.exchange
        if exchange is not None and not exchange.ended and exchange.failure is None:
            exchange.failure = error
            exchange.wake()
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Response:
    __slots__ = (
        "_pool",
        "_connection",
        "_exchange",
        "_deadline",
        "_released",
        "status",
        "headers",
        "_decoder",
    )

    def __init__(
        self,
        pool: HttptoolsUpstream,
        connection: _Connection,
        exchange: AnswerState,
        *,
        deadline: float,
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._exchange = exchange
        self._deadline = deadline
        self._released = False
        self.status = exchange.status
        self._decoder: Decoder | None = None
        if not exchange.encoded:
            self.headers: Headers = exchange.headers  # (the exchange's own: it is not reused)
            return
        self.headers = []
        for name, value in exchange.headers:
            if name == b"content-encoding":
                encoding = value.strip().lower()
                if encoding in (b"gzip", b"x-gzip", b"deflate"):
                    self._decoder = Decoder(encoding)
                elif encoding != b"identity":
                    raise UpstreamProtocolError(
                        "The engine's answer has a Content-Encoding the gateway cannot read."
                    )
            else:
                self.headers.append((name, value))

    async def _next(self, *, deadline: float | None, late: str) -> bytes:
        """The next body bytes (b"" at the end, never before); UpstreamError on
        failure or time-out."""
        exchange = self._exchange
        pool = self._pool
        while True:
            while not exchange.buffer:
                if exchange.failure is not None:
                    raise exchange.failure
                if exchange.ended:
                    if self._decoder is not None:
                        tail, self._decoder = self._decoder.flush(), None
                        if tail:
                            return tail
                    return b""
                idle_at = pool.loop.time() + pool.idle
                await pool.wait(exchange, idle_at, deadline, idle=SILENT, late=late)
            # Everything that has arrived goes on at once: bytes that came in one read
            # (or while the reader was busy) leave in one write, as a proxy that reads
            # a socket into a buffer would send them; nothing waits for more.
            buffer = exchange.buffer
            data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
            buffer.clear()
            exchange.buffered -= len(data)
            self._connection.drained(exchange)
            if self._decoder is None:
                return data
            try:
                data = self._decoder.decode(data)
            except zlib.error:
                raise UpstreamProtocolError("The engine's compressed answer is corrupt.") from None
            if data:
                return data

    async def _body(self, *, deadline: float | None, late: str) -> AsyncIterator[bytes]:
        while data := await self._next(deadline=deadline, late=late):
            yield data

    def chunks(self) -> AsyncIterator[bytes]:
        return self._body(deadline=None, late=SILENT)

    async def read(self, limit: int) -> bytes:
        exchange = self._exchange
        if exchange.ended and self._decoder is None and exchange.failure is None:
            # The whole answer is in (it came with its head, as a small one does): it is
            # taken at once, without the reading loop.
            buffer = exchange.buffer
            data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
            if len(data) > limit:
                raise too_large(limit)
            buffer.clear()
            exchange.buffered = 0
            self._connection.drained(exchange)  # (reading resumes, if it was paused)
            return data
        return await read_limited(
            functools.partial(self._next, deadline=self._deadline, late=LATE), limit
        )

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        exchange = self._exchange
        connection = self._connection
        if exchange.ended and exchange.failure is None and exchange.keep_alive:
            connection.exchange = None
            self._pool._release(connection)
        else:
            # A half-read answer leaves the connection mid-message: close it, which
            # also tells the engine to stop generating.
            connection.close()
            self._pool._release(None)


class HttptoolsUpstream:
    """UpstreamClient over a pool of keep-alive connections to one engine."""

    def __init__(self, settings: Settings) -> None:
        url = urlsplit(settings.upstream.url)
        if url.scheme != "http":
            raise ValueError("upstream.client httptools speaks plain HTTP only (use aiohttp)")
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port or 80
        self._prefix = url.path.rstrip("/")
        self._host_header = b"host: " + url.netloc.encode("idna") + b"\r\n"
        t = settings.timeouts
        self._connect_timeout = t.connect
        self._response_timeout = t.response
        self.idle = t.stream_idle
        self._limit = settings.upstream.max_connections
        self._idle: collections.deque[_Connection] = collections.deque()
        self._all: set[_Connection] = set()
        self._busy = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        self._starts: dict[tuple[str, str], bytes] = {}

    # The running loop, looked up by each request (the client may be made before
    # a loop runs) and kept for the waits that follow.
    loop: asyncio.AbstractEventLoop

    async def wait(
        self,
        exchange: AnswerState,
        idle_at: float,
        deadline: float | None,
        *,
        idle: str,
        late: str,
    ) -> None:
        """Wait for the exchange to move; UpstreamTimeout at ``idle_at`` or ``deadline``."""
        waiter = self.loop.create_future()
        exchange.waiter = waiter
        at, message = idle_at, idle
        if deadline is not None and deadline <= idle_at:
            at, message = deadline, late
        timer = self.loop.call_at(at, _expire, waiter)
        try:
            await waiter
        except TimeoutError:
            raise UpstreamTimeout(message) from None
        finally:
            timer.cancel()
            exchange.waiter = None

    def _start(self, method: str, path: str) -> bytes:
        """The request line and Host header of ``method`` ``path`` (kept for the next)."""
        start = b"%s %s%s HTTP/1.1\r\n%s" % (
            method.encode(),
            self._prefix.encode(),
            path.encode(),
            self._host_header,
        )
        if len(self._starts) < 256:  # the routes' paths; a query string is the client's
            self._starts[(method, path)] = start
        return start

    def _take_idle(self) -> _Connection | None:
        """A kept-alive connection to send on, if one is idle (most requests: then no
        coroutine is made for the wait)."""
        idle = self._idle
        if idle:
            expired = self.loop.time() - _KEEPALIVE_EXPIRY
            while idle and idle[0].idle_since < expired:
                idle.popleft().close()
            while idle:
                connection = idle.pop()
                if not connection.closed:
                    self._busy += 1
                    return connection
        return None

    async def _acquire(self, deadline: float, method: str, path: str) -> _Connection:
        while True:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    self._busy += 1
                    return connection
            if self._busy < self._limit:
                self._busy += 1
                try:
                    return await self._connect(f"{method} {path}")
                except BaseException:
                    self._release(None)
                    raise
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            timer = self.loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            except TimeoutError:
                raise timed_out(f"{method} {path}") from None
            except BaseException:
                # Woken and then cancelled: pass the turn on.
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._wake_one()
                raise
            finally:
                timer.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, what: str) -> _Connection:
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, protocol = await self.loop.create_connection(
                    lambda: _Connection(self), self._host, self._port
                )
        except TimeoutError:
            raise connect_timed_out(what) from None
        except OSError as exc:
            raise unreachable(what) from exc
        self._all.add(protocol)
        return protocol

    def _release(self, connection: _Connection | None) -> None:
        self._busy -= 1
        if connection is not None and not connection.closed and not self._closed:
            connection.idle_since = self.loop.time()
            self._idle.append(connection)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _forget(self, connection: _Connection) -> None:
        self._all.discard(connection)

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        self.loop = loop = asyncio.get_running_loop()
        deadline = loop.time() + self._response_timeout
        start = self._starts.get((method, path))
        if start is None:
            start = self._start(method, path)
        head = [start]
        if body or method != "GET":
            head.append(b"content-length: %d\r\n" % len(body))
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        head.append(b"\r\n")
        connection = self._take_idle() or await self._acquire(deadline, method, path)
        exchange = connection.send(b"".join(head), body)
        try:
            while not exchange.head_done:
                if exchange.failure is not None:
                    raise exchange.failure
                if exchange.ended:
                    raise UpstreamProtocolError("The engine's answer has no head.")
                idle_at = self.loop.time() + self.idle
                await self.wait(exchange, idle_at, deadline, idle=NO_ANSWER, late=NO_ANSWER)
            return _Response(self, connection, exchange, deadline=deadline)
        except BaseException:
            connection.close()
            self._release(None)
            raise

    async def aclose(self) -> None:
        self._closed = True
        for connection in list(self._all):
            connection.close()
        self._idle.clear()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
