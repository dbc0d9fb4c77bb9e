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

A connection goes back to the pool only after one whole, well-framed answer to
its one request: an interim head (``100 Continue``, ``103 Early Hints``) is read
past, never taken for the answer; a head past ``limits.max_response_header_bytes``
or ``limits.max_response_headers`` is refused as it arrives; a byte after the
answer's end (a second answer, or the start of one) closes the connection, as
does an answer not read to its end. Only then can no request be handed bytes
that belong to another's answer.

An engine may close a kept-alive connection just as a request goes out on it
(llama.cpp's server closes one after each stream, though its head said
keep-alive): a request whose reused connection closes before a byte of its
answer came is sent again on another connection, as HTTP clients do with an
idle connection the server closed (RFC 9112, section 9.3.1); the engine answered
nothing, so nothing reached the client. A new connection's close is the 502.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Coroutine
from typing import cast
from urllib.parse import urlsplit

import httptools

from gateway._types import Headers
from gateway.errors import UpstreamError, UpstreamProtocolError, UpstreamTimeout
from gateway.routing.hint import NO_HINT, Hint
from gateway.settings import Settings
from gateway.upstream.answerbody import PooledResponse, encoded_response
from gateway.upstream.answerstate import AnswerState
from gateway.upstream.base import (
    NO_ANSWER,
    UpstreamResponse,
    connect_timed_out,
    head_size,
    head_too_large,
    timed_out,
    unreachable,
)

_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024
# Idle pooled connections are closed after this many seconds (httpx's default),
# checked whenever the pool is used.
_KEEPALIVE_EXPIRY = 5.0
# The head room of a connection with no head to read: a byte is a surprise.
_NO_HEAD = -1


def _drop(data: bytes) -> None:
    """on_body's target before a request: the parser never calls it then."""


class _Stop(Exception):
    """Raised in a parser callback to stop the parser: the connection is failed."""


class _Unanswered(UpstreamProtocolError):
    """The engine closed the connection before a byte of the answer came."""


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
        "_trailers",
        "_framing",
        "_append",
        "_parser",
        "_room",
        "_max_head_bytes",
        "_max_headers",
    )

    def __init__(self, pool: HttptoolsUpstream) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.paused = False
        self.idle_since = 0.0
        self.exchange: AnswerState | None = None
        self._headers: Headers = []  # the headers of the exchange under way
        # Trailer lines after a chunked body's last chunk: the parser's, dropped.
        self._trailers: Headers = []
        self._framing = 0  # bytes of the reads since the last that held body bytes
        self._append: Callable[[bytes], None] = _drop  # its body buffer's (set by send)
        self._parser = httptools.HttpResponseParser(self)
        # While a head is read, the bytes it may still take once the read under way is
        # parsed; 0 in a body; _NO_HEAD before a request and after its answer's end.
        self._room = _NO_HEAD
        self._max_head_bytes = pool.max_head_bytes
        self._max_headers = pool.max_headers

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not a subclass of asyncio.Transport, but is one.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        room = self._room
        if room:  # not in a body (a body's bytes go straight to the parser)
            if room < 0:
                # Bytes nobody asked for, before a request or after its answer's end:
                # the connection cannot be trusted any more.
                self.close()
                return
            # The parser holds an unfinished header line whole (a value can be any
            # length) before any callback sees it, so the head is counted as it comes:
            # at most one read past its limit is ever held.
            self._room = left = room - len(data)
            spent = left <= 0  # (true: this read may take the head past its room)
        else:
            spent = False
        exchange = self.exchange
        if exchange is None:  # (never: set while a head or a body is read, room >= 0)
            self.close()
            return
        held = len(exchange.buffer)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamProtocolError("The engine switched protocols."))
        except httptools.HttpParserError:
            self._fail(UpstreamProtocolError("The engine's answer is not valid HTTP."))
        if spent and not exchange.head_done:
            self._fail(self._pool.head_too_large())  # the room is spent, the head open
        elif len(exchange.buffer) > held:
            # Body bytes came (on_body only appends: it runs for every chunk of a
            # read). The back-pressure counts the read whole, its framing too: the
            # reader takes everything at once and the count starts again at 0.
            self._framing = 0
            buffered = exchange.buffered = exchange.buffered + len(data)
            if buffered > _HIGH_WATER and not self.paused and not self.closed and self.transport:
                self.paused = True
                self.transport.pause_reading()
            if exchange.waiter is not None:  # (once per read)
                exchange.wake()
        elif not room and exchange.head_done and not exchange.ended:
            # A read inside the body without a byte of it: chunk framing, or trailer
            # lines after the last chunk, which the parser holds until each ends (and
            # the answer is not over until they do): bounded as a head is. (A read that
            # began in the head is the head's, counted by its room.)
            self._framing += len(data)
            if self._framing > self._max_head_bytes:
                self._fail(self._pool.trailers_too_large())

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
        # No byte of the answer yet: the head's room is untouched.
        unanswered = not exchange.head_done and self._room == self._max_head_bytes
        self._fail(
            (_Unanswered if unanswered else UpstreamProtocolError)(
                "The engine closed the connection unexpectedly."
            )
        )

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))  # (the exchange's: set by send)

    def on_message_begin(self) -> None:
        if self.exchange.ended:  # type: ignore[union-attr]  # (never None while fed)
            # A second answer to one request, in the read that ended the first: the
            # next request on this connection would be handed it.
            raise _Stop  # data_received closes the connection

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        assert exchange is not None
        status = exchange.status = self._parser.get_status_code()
        if status < 200:
            self._interim(exchange, status)
            return
        headers = exchange.headers
        if len(headers) > self._max_headers or self._room < 0:
            self._check_head(headers)
        self._room = 0
        exchange.keep_alive = self._parser.should_keep_alive()
        names = dict(headers)  # (made in C: cheaper than a loop here)
        exchange.until_close = b"content-length" not in names and not (
            b"transfer-encoding" in names
            and any(n == b"transfer-encoding" and b"chunked" in v.lower() for n, v in headers)
        )
        exchange.encoded = b"content-encoding" in names
        exchange.head_done = True
        self._headers = self._trailers  # (what on_header gets from now: trailer lines)
        exchange.wake()

    def on_body(self, body: bytes) -> None:
        # The exchange's buffer; data_received counts the read and wakes the reader.
        self._append(body)

    def on_message_complete(self) -> None:
        exchange = self.exchange
        assert exchange is not None
        if not exchange.head_done:
            return  # an interim head's end: the answer's head comes next
        exchange.ended = True
        self._room = -1  # (_NO_HEAD) a byte more is a surprise
        exchange.wake()

    def _check_head(self, headers: Headers) -> None:
        """Fail the exchange and stop the parser if the head has too many lines, or, when
        this read went past the head's room, too many bytes (counted exactly here)."""
        pool = self._pool
        if len(headers) > self._max_headers or head_size(headers) > pool.max_head_bytes:
            self._fail(pool.head_too_large())
            raise _Stop

    def _interim(self, exchange: AnswerState, status: int) -> None:
        """An interim (1xx) head: read past, its headers dropped (``103 Early Hints``'s
        links are for browsers); the answer's own head follows on the connection."""
        if status < 100:
            self._fail(UpstreamProtocolError(f"The engine answered HTTP {status:03d}."))
            raise _Stop
        if status == 101:
            self._fail(UpstreamProtocolError("The engine switched protocols."))
            raise _Stop
        del exchange.headers[:]  # (the list on_header fills: the answer's go in it)

    # used by the pool and the response

    def send(self, head: bytes, body: bytes) -> AnswerState:
        assert self.transport is not None
        self.exchange = exchange = AnswerState()
        self._headers = exchange.headers
        self._append = exchange.buffer.append
        self._framing = 0
        if self._trailers:
            self._trailers.clear()
        self._room = self._max_head_bytes
        if len(body) < 65536:
            self.transport.write(head + body)
        else:
            self.transport.write(head)
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
        limits = settings.limits
        self.max_head_bytes = limits.max_response_header_bytes
        self.max_headers = limits.max_response_headers
        self._lingering: set[asyncio.Task[None]] = set()
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
                    self.release(None)
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

    def release(self, connection: _Connection | None) -> None:
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

    def head_too_large(self) -> UpstreamError:
        """The failure of an answer head past this pool's limits."""
        return head_too_large(self.max_head_bytes, self.max_headers)

    def trailers_too_large(self) -> UpstreamError:
        """The failure of an answer whose trailer lines go past the head's byte limit."""
        return UpstreamProtocolError(
            f"The engine's answer trailers are larger than the gateway's limit "
            f"({self.max_head_bytes} bytes).",
            code="upstream_header_too_large",
        )

    def linger(self, wait: Coroutine[None, None, None]) -> None:
        """Run ``wait`` (a finished answer's reading of its end) in the background."""
        task = self.loop.create_task(wait)
        self._lingering.add(task)
        task.add_done_callback(self._lingering.discard)

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
            if not exchange.encoded:
                return PooledResponse(self, connection, exchange, deadline=deadline)
            return encoded_response(self, connection, exchange, deadline=deadline)
        except BaseException as exc:
            connection.close()
            self.release(None)
            if isinstance(exc, _Unanswered) and connection.idle_since:
                # A kept-alive connection the engine closed as the request went out:
                # again, on another (each such one is closed, so this ends; a new
                # connection's close is the answer).
                return await self.request(method, path, headers=headers, body=body, hint=hint)
            raise

    async def aclose(self) -> None:
        self._closed = True
        lingering = list(self._lingering)
        for task in lingering:
            task.cancel()
        for connection in list(self._all):
            connection.close()
        self._idle.clear()
        if lingering:
            await asyncio.wait(lingering)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
