"""UpstreamClient on asyncio protocols and the httptools parser: the fastest one.

The gateway asks little of an HTTP client: one engine, HTTP/1.1, keep-alive,
a pool, raw body bytes, time-outs. A general client pays for much more on
every request (URL objects, header multidicts, cookie jars, redirect and auth
machinery, tracing hooks): aiohttp's request path alone costs the gateway
about 100 us a request, this one a fraction of that. A request is written in
one ``transport.write``; the answer is parsed by httptools (llhttp, in C) in
``data_received``, and its body reaches the reader through a small buffer with
back-pressure (the socket stops being read past ``_HIGH_WATER`` bytes; the
connection is ``httptools_connection.Connection``).

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
from collections.abc import Coroutine
from urllib.parse import urlsplit

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
    head_too_large,
    timed_out,
    unreachable,
)
from gateway.upstream.httptools_connection import Connection, Unanswered

# Idle pooled connections are closed after this many seconds (httpx's default),
# checked whenever the pool is used.
_KEEPALIVE_EXPIRY = 5.0


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
        self._idle: collections.deque[Connection] = collections.deque()
        self._all: set[Connection] = set()
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

    def _take_idle(self) -> Connection | None:
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

    async def _acquire(self, deadline: float, method: str, path: str) -> Connection:
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

    async def _connect(self, what: str) -> Connection:
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, protocol = await self.loop.create_connection(
                    lambda: Connection(self), self._host, self._port
                )
        except TimeoutError:
            raise connect_timed_out(what) from None
        except OSError as exc:
            raise unreachable(what) from exc
        self._all.add(protocol)
        return protocol

    def release(self, connection: Connection | None) -> None:
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

    def forget(self, connection: Connection) -> None:
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
            if isinstance(exc, Unanswered) and connection.idle_since:
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
