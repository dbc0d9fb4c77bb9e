"""One keep-alive connection of the httptools client: an asyncio protocol whose
answers httptools (llhttp, in C) parses in ``data_received``.

An answer's body reaches its reader through a small buffer with back-pressure (the
socket stops being read past ``_HIGH_WATER`` bytes). A head past
``limits.max_response_header_bytes`` or ``limits.max_response_headers`` is refused as
it arrives, and so are trailer lines past the head's byte limit; a byte after the
answer's end (a second answer, or the start of one) closes the connection. The
pool that made the connection (``httptools_impl``) is reached through ``Pool``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

import httptools

from gateway._types import Headers
from gateway.errors import UpstreamError, UpstreamProtocolError
from gateway.upstream.answerstate import AnswerState
from gateway.upstream.base import head_size


class Pool(Protocol):
    """What a connection asks of the pool that made it."""

    max_head_bytes: int
    max_headers: int

    def forget(self, connection: Connection) -> None:
        """The connection closed: not the pool's any more."""

    def head_too_large(self) -> UpstreamError:
        """The failure of an answer head past the pool's limits."""

    def trailers_too_large(self) -> UpstreamError:
        """The failure of an answer whose trailer lines go past the head's byte limit."""


_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024
# The head room of a connection with no head to read: a byte is a surprise.
_NO_HEAD = -1


def _drop(data: bytes) -> None:
    """on_body's target before a request: the parser never calls it then."""


class _Stop(Exception):
    """Raised in a parser callback to stop the parser: the connection is failed."""


class Unanswered(UpstreamProtocolError):
    """The engine closed the connection before a byte of the answer came."""


class Connection(asyncio.Protocol):
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

    def __init__(self, pool: Pool) -> None:
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
        self._pool.forget(self)
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
            (Unanswered if unanswered else UpstreamProtocolError)(
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
