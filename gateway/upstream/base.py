"""The gateway's view of the engine: the interface every upstream client implements.

``UpstreamClient.request()`` sends one request and returns an UpstreamResponse
(status, headers, the body as an async iterator of raw bytes, ``aclose``). Each
implementation (httpx_impl, aiohttp_impl, httptools_impl; chosen by name in
factory.py) enforces the configured time-outs and turns its library's
exceptions into the gateway's UpstreamError family at its own boundary, with
one table (``translate``) and the messages written here, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

from gateway._types import Headers
from gateway.errors import (
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.routing.hint import NO_HINT, Hint

SILENT = "The engine went silent in the middle of the stream."
NO_ANSWER = "The engine did not answer in time."
LATE = "The engine did not finish its answer in time."


class UpstreamResponse(Protocol):
    """An engine response whose body has not been read yet."""

    status: int
    headers: Headers  # names in lower case

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw body bytes as they arrive; UpstreamTimeout after ``stream_idle`` of silence."""
        ...

    async def read(self, limit: int) -> bytes:
        """The whole body (within the response time-out); UpstreamProtocolError past ``limit``."""
        ...

    def finish(self) -> None:
        """The caller has all of the answer it needs (a stream's end event came): the
        body's own end may still be read, within a small allowance, so that ``aclose``
        can keep the connection instead of closing it."""
        ...

    async def aclose(self) -> None:
        """Release the connection; closes it if the body was not read to its end."""
        ...


class UpstreamClient(Protocol):
    """Sends requests to the engine."""

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        """Send a request and wait for the response headers. UpstreamUnreachable
        only when no connection could be made (nothing was sent): the balancer
        retries on another replica then, and only then."""
        ...

    async def aclose(self) -> None:
        """Close every pooled connection."""
        ...


def connect_timed_out(what: str) -> UpstreamError:
    """No connection within the connect time-out: nothing was sent."""
    return UpstreamUnreachable(f"The engine did not accept a connection in time ({what}).")


def unreachable(what: str) -> UpstreamError:
    """The connection was refused or failed: nothing was sent."""
    return UpstreamUnreachable(f"The engine is unreachable ({what}).")


def timed_out(what: str) -> UpstreamError:
    """The engine took longer than the response time-out."""
    return UpstreamTimeout(f"The engine did not answer in time ({what}).")


def closed(what: str) -> UpstreamError:
    """The engine closed the connection before its answer was complete."""
    return UpstreamProtocolError(f"The engine closed the connection unexpectedly ({what}).")


def failed(what: str) -> UpstreamError:
    """Any other failure of the connection."""
    return UpstreamProtocolError(f"The engine connection failed ({what}).")


def too_large(limit: int) -> UpstreamError:
    """An answer past ``limits.max_response_bytes``."""
    return UpstreamProtocolError(
        f"The engine's answer is larger than the gateway's limit ({limit} bytes)."
    )


def head_too_large(max_bytes: int, max_lines: int) -> UpstreamError:
    """An answer head past ``limits.max_response_header_bytes`` or ``..._headers``."""
    return UpstreamProtocolError(
        f"The engine's answer head is larger than the gateway's limit ({max_bytes} bytes "
        f"or {max_lines} header lines).",
        code="upstream_header_too_large",
    )


def head_size(headers: Sequence[tuple[bytes, bytes]]) -> int:
    """The bytes of ``headers`` as header lines (``name: value`` and CRLF)."""
    return sum(len(name) + len(value) + 4 for name, value in headers)


def check_head_size(headers: Sequence[tuple[bytes, bytes]], max_bytes: int, max_lines: int) -> None:
    """``head_too_large`` if ``headers`` pass either limit (for the clients whose own
    parser bounds the head's memory, but by its own measures)."""
    if len(headers) > max_lines or head_size(headers) > max_bytes:
        raise head_too_large(max_bytes, max_lines)


# A client library's exception classes, most specific first, each with the
# failure it means; anything else is ``failed``.
ErrorTable = Sequence[
    tuple[type[BaseException] | tuple[type[BaseException], ...], Callable[[str], UpstreamError]]
]


def translate(exc: BaseException, table: ErrorTable, *, what: str) -> UpstreamError:
    """The gateway's UpstreamError for a client library's exception (``raise ... from exc``)."""
    for kinds, failure in table:
        if isinstance(exc, kinds):
            return failure(what)
    return failed(what)


async def read_limited(next_chunk: Callable[[], Awaitable[bytes]], limit: int) -> bytes:
    """A whole body from ``next_chunk`` (b"" at the end, never before); ``too_large``
    past ``limit`` bytes. A function, not an async iterator: an async generator is
    registered with the loop and finalized, on every answer."""
    parts: list[bytes] = []
    size = 0
    while chunk := await next_chunk():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)
