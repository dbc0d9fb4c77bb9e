"""Which headers cross the gateway, each way.

Hop-by-hop headers (RFC 9110 7.6.1) and whatever ``Connection`` names belong
to one connection, never forwarded. Upstream, the engine's Host is its own,
the body length is the gateway's, the client's key (``Authorization``, or
Anthropic's ``x-api-key``) is not the engine's, and
compression would stop the gateway reading error bodies.

What an engine gets as ``X-Request-ID`` is always a UUID (some engines refuse
anything else: llama-cpp-python's server answers 400 with an empty body): the
request id itself when it is one, else a UUID derived from it, the id itself
then going in ``X-Client-Request-ID``; each of a fan-out's n requests gets a
UUID of its own derived from that one. docs/requests.md says exactly how.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping

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
    b"x-api-key",  # Anthropic's header for the same key: the client's, never the engine's
    b"accept-encoding",
    b"expect",
    b"x-request-id",
    b"cookie",
}
DROP_DOWNSTREAM = HOP_BY_HOP | {b"content-length", b"date", b"server", b"x-request-id"}
_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:\-]{1,128}$")
CLIENT_REQUEST_ID = b"x-client-request-id"
# The namespace of the UUIDs the gateway derives with uuid5.
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "ft-gateway:request-id")
_HEX32 = re.compile(rb"^[0-9a-fA-F]{32}$")
_CANONICAL = re.compile(rb"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


def request_id_of(headers: Headers) -> bytes:
    """The client's X-Request-ID when it is sane, else a new one."""
    return request_ids(headers)[0]


def request_ids(
    headers: Headers, named: dict[bytes, bytes] | None = None
) -> tuple[bytes, str, bytes | None]:
    """The request's id (the client's X-Request-ID when it is sane, else a new one),
    as bytes and as text, and for a new one the UUID form an engine is sent (None for
    the client's: with_request_id works it out). ``named``: the headers by name
    where no name repeats (Call.named), else None."""
    if named is None or b"x-request-id" in named:
        for name, value in headers:
            if name == b"x-request-id" and _REQUEST_ID.match(value):
                return value, value.decode(), None
    # uuid4().hex without building a UUID (5x cheaper): 122 random bits, version 4.
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    h = raw.hex()
    return h.encode(), h, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}".encode()


def _derived(name: str) -> bytes:
    return str(uuid.uuid5(NAMESPACE, name)).encode()


def _as_uuid(request_id: bytes) -> bytes | None:
    if _CANONICAL.match(request_id):
        return request_id.lower()
    if _HEX32.match(request_id):
        h = request_id.lower()
        return b"-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))
    return None


def engine_request_id(request_id: bytes) -> bytes:
    """The ``X-Request-ID`` an engine is sent for ``request_id``: a UUID, 8-4-4-4-12
    lower-case. ``request_id`` itself when it is a UUID (that form or 32 hex digits,
    as the gateway's own ids are), else ``uuid5(NAMESPACE, request_id)``."""
    return _as_uuid(request_id) or _derived(request_id.decode("ascii"))


def with_request_id(headers: Headers, request_id: bytes, as_uuid: bytes | None = None) -> Headers:
    """``headers`` (already without the client's X-Request-ID, a list of the caller's
    own) plus the engine's request-id headers: ``X-Request-ID`` a UUID (``as_uuid``
    where the caller knows it: request_ids gives it for a new id), and where
    ``request_id`` is not one, ``X-Client-Request-ID: <request_id>`` (in place of any
    the client sent)."""
    if as_uuid is None:
        as_uuid = _as_uuid(request_id)
    if as_uuid is not None:
        headers.append((b"x-request-id", as_uuid))
        return headers
    out = [(n, v) for n, v in headers if n != CLIENT_REQUEST_ID]
    return [
        *out,
        (b"x-request-id", _derived(request_id.decode("ascii"))),
        (CLIENT_REQUEST_ID, request_id),
    ]


def choice_request_id(engine_id: bytes, index: int) -> bytes:
    """Fan-out request ``index``'s ``X-Request-ID``: ``uuid5(NAMESPACE, "<engine_id>/<index>")``,
    a UUID of its own derived from the request's (``engine_id``, as engine_request_id gives)."""
    return _derived(f"{engine_id.decode('ascii')}/{index}")


def choice_headers(headers: Headers, index: int) -> Headers:
    """``headers`` (an engine request's) with fan-out request ``index``'s X-Request-ID."""
    return [(n, choice_request_id(v, index) if n == b"x-request-id" else v) for n, v in headers]


def filter_headers(
    headers: Headers, drop: frozenset[bytes], named: Mapping[bytes, bytes] | None = None
) -> Headers:
    """``headers`` without ``drop`` (which names ``Connection``) and without what
    ``Connection`` names; ``named``: the same headers by name, where the caller has
    them (a look-up there saves a scan)."""
    out = [h for h in headers if h[0] not in drop]
    if len(out) == len(headers):
        return out
    if named is None:
        named = dict(headers)  # (made in C: cheaper than a loop in Python)
    if b"connection" not in named:
        return out
    listed: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            listed.update(t.strip().lower() for t in value.split(b","))
    return [h for h in out if h[0] not in listed] if listed else out
