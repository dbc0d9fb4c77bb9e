"""Which headers cross the gateway, each way.

Hop-by-hop headers (RFC 9110 7.6.1) and whatever ``Connection`` names belong
to one connection, never forwarded. Upstream, the engine's Host is its own,
the body length is the gateway's, the client's key is not the engine's, and
compression would stop the gateway reading error bodies.
"""

from __future__ import annotations

import os
import re

from gateway._types import Headers

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
DROP_UPSTREAM = HOP_BY_HOP | {
    b"host",
    b"content-length",
    b"authorization",
    b"accept-encoding",
    b"expect",
    b"x-request-id",
    b"cookie",
}
DROP_DOWNSTREAM = HOP_BY_HOP | {b"content-length", b"date", b"server", b"x-request-id"}
_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:\-]{1,128}$")


def request_id_of(headers: Headers) -> bytes:
    """The client's X-Request-ID when it is sane, else a new one."""
    for name, value in headers:
        if name == b"x-request-id" and _REQUEST_ID.match(value):
            return value
    # 128 random bits in hex, like uuid4().hex, without building a UUID (5x cheaper).
    return os.urandom(16).hex().encode()


def _connection_tokens(headers: Headers) -> frozenset[bytes]:
    tokens: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
    return frozenset(tokens)


def filter_headers(headers: Headers, drop: frozenset[bytes]) -> Headers:
    """``headers`` without ``drop`` and without what ``Connection`` names."""
    named = _connection_tokens(headers)
    return [(n, v) for n, v in headers if n not in drop and n not in named]
