"""The body of an answer on a pooled keep-alive connection, as its reader takes it (the
httptools client's): whole, in pieces as it arrives, or, after a stream's end event,
its last bytes read in the background so that the connection can be kept.

The pool and the connection are seen through two small protocols (``Pool``, ``Link``),
so that this module imports neither.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Protocol

from gateway._types import Headers
from gateway.errors import UpstreamError
from gateway.upstream.answerstate import AnswerState
from gateway.upstream.base import LATE, SILENT, read_limited, too_large
from gateway.upstream.decoder import Decoder, decoding

# After a stream's end event, how long and how much more the body's own end may take
# (engines write [DONE] and the last chunk apart) before the connection is closed.
LINGER_SECONDS = 1.0
LINGER_BYTES = 64 * 1024


class Link(Protocol):
    """A pooled connection, as the answer it carries sees it."""

    closed: bool
    exchange: AnswerState | None

    def drained(self, exchange: AnswerState) -> None:
        """The reader took buffered bytes: reading may resume."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...


class Pool(Protocol):
    """The pool of connections, as an answer sees it."""

    loop: asyncio.AbstractEventLoop
    idle: float

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
        ...

    # (Any: the pool takes its own connection class, which is a Link.)
    def release(self, connection: Any) -> None:
        """Give a connection back: kept (``connection``) or closed (None)."""
        ...

    def linger(self, wait: Coroutine[None, None, None]) -> None:
        """Run ``wait`` in the background."""
        ...


class PooledResponse:
    """An answer whose head is in; its body, as it arrives (``chunks()`` is itself)."""

    __slots__ = (
        "_pool",
        "_connection",
        "_exchange",
        "_deadline",
        "_released",
        "_finished",
        "status",
        "headers",
    )

    def __init__(
        self,
        pool: Pool,
        connection: Link,
        exchange: AnswerState,
        *,
        deadline: float,
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._exchange = exchange
        self._deadline = deadline
        self._released = False
        self._finished = False
        self.status = exchange.status
        self.headers: Headers = exchange.headers  # (the exchange's own: it is not reused)

    async def _next(self, *, deadline: float | None, late: str) -> bytes:
        """The next body bytes (b"" at the end, never before); UpstreamError on
        failure or time-out."""
        exchange = self._exchange
        pool = self._pool
        while not exchange.buffer:
            if exchange.failure is not None:
                raise exchange.failure
            if exchange.ended:
                return b""
            idle_at = pool.loop.time() + pool.idle
            await pool.wait(exchange, idle_at, deadline, idle=SILENT, late=late)
        # Everything that has arrived goes on at once: bytes that came in one read
        # (or while the reader was busy) leave in one write, as a proxy that reads
        # a socket into a buffer would send them; nothing waits for more.
        buffer = exchange.buffer
        data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
        buffer.clear()
        exchange.buffered = 0  # (all of it taken)
        self._connection.drained(exchange)
        return data

    # An iterator, not an async generator: one left before its end (a stream stops
    # at its end event) would be finalized by the loop, a task made per stream.
    def __aiter__(self) -> PooledResponse:
        return self

    async def __anext__(self) -> bytes:
        data = await self._next(deadline=None, late=SILENT)
        if data:
            return data
        raise StopAsyncIteration

    def chunks(self) -> AsyncIterator[bytes]:
        return self

    async def read(self, limit: int) -> bytes:
        exchange = self._exchange
        if exchange.ended and exchange.failure is None:
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

    def finish(self) -> None:
        self._finished = True

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        exchange = self._exchange
        connection = self._connection
        if exchange.ended and exchange.failure is None and exchange.keep_alive:
            connection.exchange = None
            self._pool.release(connection)
        elif (
            self._finished
            and exchange.failure is None
            and exchange.keep_alive
            and not connection.closed
        ):
            # The stream's end event came and its body's end not yet (an engine writes
            # them apart): wait for it a moment, in the background, to keep the
            # connection.
            self._pool.linger(self._linger())
        else:
            # A half-read answer leaves the connection mid-message: close it, which
            # also tells the engine to stop generating.
            connection.close()
            self._pool.release(None)

    async def _linger(self) -> None:
        """Read the rest of a finished answer for at most LINGER_SECONDS and
        LINGER_BYTES, then give the connection back (kept if the answer ended)."""
        size = 0
        try:
            deadline = self._pool.loop.time() + LINGER_SECONDS
            while size <= LINGER_BYTES:
                data = await self._next(deadline=deadline, late=LATE)
                if not data:
                    break
                size += len(data)
        except UpstreamError:
            pass
        finally:
            self._released = self._finished = False
            await self.aclose()  # (kept if it ended within those; closed if not)


class _DecodedResponse(PooledResponse):
    """An answer with a gzip or deflate Content-Encoding, undone a bounded piece at a
    time (decoder.py)."""

    __slots__ = ("_decoder",)

    def __init__(
        self,
        pool: Pool,
        connection: Link,
        exchange: AnswerState,
        decoder: Decoder,
        headers: Headers,
        *,
        deadline: float,
    ) -> None:
        super().__init__(pool, connection, exchange, deadline=deadline)
        self.headers = headers
        self._decoder = decoder

    async def _next(self, *, deadline: float | None, late: str) -> bytes:
        decoder = self._decoder
        while True:
            if decoder.pending:
                data = decoder.decode(b"")
            else:
                data = await super()._next(deadline=deadline, late=late)
                if not data:
                    return decoder.flush()  # (b"" once it has been flushed)
                data = decoder.decode(data)
            if data:
                return data

    async def read(self, limit: int) -> bytes:
        return await read_limited(
            functools.partial(self._next, deadline=self._deadline, late=LATE), limit
        )


def encoded_response(
    pool: Pool, connection: Link, exchange: AnswerState, *, deadline: float
) -> PooledResponse:
    """The response of an exchange with a Content-Encoding header."""
    headers, decoder = decoding(exchange.headers)
    if decoder is None:
        response = PooledResponse(pool, connection, exchange, deadline=deadline)
        response.headers = headers
        return response
    return _DecodedResponse(pool, connection, exchange, decoder, headers, deadline=deadline)
