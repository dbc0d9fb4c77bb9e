"""The bytes of HTTP/1.1 answers as the fake engines write them on the wire: a head, a
whole response, the chunks of a chunked body, an SSE answer's start and end.
Standard library only, as tests/support/engine.py (which re-exports them)."""

from __future__ import annotations

import http

from tests.support.bodies import DONE

JSON = [(b"content-type", b"application/json")]


def http_head(status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The status line and headers of an HTTP/1.1 response."""
    lines = [b"HTTP/1.1 %d %s" % (status, http.HTTPStatus(status).phrase.encode())]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def http_response(
    status: int, body: bytes, *, headers: list[tuple[bytes, bytes]] | None = None
) -> bytes:
    """A whole HTTP/1.1 response with Content-Length."""
    return http_head(status, [(b"content-length", b"%d" % len(body)), *(headers or [])]) + body


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


STREAM_HEAD = http_head(
    200, [(b"content-type", b"text/event-stream"), (b"transfer-encoding", b"chunked")]
)
LAST_CHUNK = b"0\r\n\r\n"


def stream_start(*events: bytes) -> bytes:
    """The head of an SSE answer and ``events``, each one chunk of its chunked body."""
    return STREAM_HEAD + b"".join(chunk(e) for e in events)


def stream_end(*events: bytes) -> bytes:
    """``events``, then ``[DONE]`` and the end of the chunked body."""
    return b"".join(chunk(e) for e in events) + chunk(DONE) + LAST_CHUNK
