"""Which headers cross the gateway, each way: one table (``HeaderPolicy``), which a
route extends; docs/headers.md shows it row for row (a test holds them equal).

To the engine, a header passes unless the table drops or replaces it, or its name
is credential-like (``x-api-key``, Anthropic's key, ``*-token``, ``*-secret``, ...) or of the
forwarding family (``x-forwarded-*``, ``forwarded``, ``x-real-ip``): the client's
keys are not the engine's, and the addresses a client claims are not the gateway's
to vouch for. Hop-by-hop headers (RFC 9110 7.6.1) and whatever ``Connection`` names
belong to one connection, never forwarded either way. The engine's Host is its own,
the body length is the gateway's, and compression would stop the gateway reading
error bodies. The query string loses its credential-like parameters (``api_key``).

To the client, an engine header passes only if the table relays it (an allow-list):
an engine's cookies, its Server, the host names and addresses its proxies add are
nobody's business but the operator's; Content-Type and Retry-After are what a
client uses.

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
from urllib.parse import unquote_to_bytes

from gateway._types import Headers

FORWARDED = "forwarded"  # to the engine as the client sent it
RELAYED = "relayed"  # to the client as the engine sent it
DROPPED = "dropped"
REPLACED = "replaced"  # the gateway sends its own
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
# name: (to the engine, to the client). A name not here: forwarded unless its name
# says credential or forwarding (``_dropped_name``); never relayed.
TABLE: dict[bytes, tuple[str, str]] = {
    **dict.fromkeys(HOP_BY_HOP, (DROPPED, DROPPED)),
    b"host": (REPLACED, DROPPED),
    b"content-length": (REPLACED, REPLACED),
    b"accept-encoding": (REPLACED, DROPPED),
    b"expect": (DROPPED, DROPPED),
    b"x-request-id": (REPLACED, REPLACED),
    b"x-client-request-id": (FORWARDED, DROPPED),
    b"authorization": (REPLACED, DROPPED),
    b"cookie": (DROPPED, DROPPED),
    b"set-cookie": (DROPPED, DROPPED),
    b"x-api-key": (DROPPED, DROPPED),
    b"api-key": (DROPPED, DROPPED),
    b"forwarded": (DROPPED, DROPPED),
    b"x-forwarded-for": (DROPPED, DROPPED),
    b"x-forwarded-host": (DROPPED, DROPPED),
    b"x-forwarded-proto": (DROPPED, DROPPED),
    b"x-real-ip": (DROPPED, DROPPED),
    b"content-type": (FORWARDED, RELAYED),
    b"retry-after": (FORWARDED, RELAYED),
    b"retry-after-ms": (FORWARDED, RELAYED),
    b"user-agent": (FORWARDED, DROPPED),
    b"anthropic-version": (FORWARDED, DROPPED),
    b"anthropic-beta": (FORWARDED, DROPPED),
    b"server": (FORWARDED, DROPPED),
    b"via": (FORWARDED, DROPPED),
}
_CREDENTIAL_NAME = re.compile(
    rb"(?:^|-)(?:api-?key|apikey|key|token|secret|password|passwd|auth|authorization"
    rb"|credentials?|cookie|signature)(?:-|$)"
)
_CLAIMED_ADDRESS = frozenset(
    {
        b"true-client-ip",
        b"x-client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"x-cluster-client-ip",
        b"x-original-forwarded-for",
    }
)
# Names remembered per table (a client may send any): past this, each new one is
# judged every time it comes, and nothing grows.
_MAX_NAMES = 4096


def _dropped_name(name: bytes) -> bool:
    """A header name (lower case) that says credential, or an address a client claims."""
    name = name.replace(b"_", b"-")
    return (
        _CREDENTIAL_NAME.search(name) is not None
        or name.startswith(b"x-forwarded-")
        or name in _CLAIMED_ADDRESS
    )


class HeaderPolicy:
    """The table of what crosses the gateway each way (``TABLE``'s shape), compiled."""

    def __init__(self, table: Mapping[bytes, tuple[str, str]]) -> None:
        self.table = dict(table)
        # Header name -> whether it goes to the engine: the table's names, and each other
        # name once seen (judged by its look, ``_dropped_name``).
        self._forwards = {name: up == FORWARDED for name, (up, _) in self.table.items()}
        self._relays = frozenset(n for n, (_, down) in self.table.items() if down == RELAYED)

    def extend(
        self,
        *,
        upstream: Mapping[bytes, str] | None = None,
        downstream: Mapping[bytes, str] | None = None,
    ) -> HeaderPolicy:
        """A new table: this one with ``upstream``/``downstream`` actions set by name (a
        route's own headers: its credential dropped, its protocol's headers relayed)."""
        table = dict(self.table)
        for name, action in (upstream or {}).items():
            down = table.get(name, (FORWARDED, DROPPED))[1]
            table[name] = (action, down)
        for name, action in (downstream or {}).items():
            up = table.get(name, (DROPPED if _dropped_name(name) else FORWARDED, DROPPED))[0]
            table[name] = (up, action)
        return HeaderPolicy(table)

    def rows(self) -> dict[str, tuple[str, str]]:
        """The table by name, for its documentation."""
        return {name.decode(): actions for name, actions in self.table.items()}

    def to_engine(self, headers: Headers, named: Mapping[bytes, bytes] | None = None) -> Headers:
        """The client's ``headers`` an engine may get (``named``: the same by name, where
        the caller has them); the gateway adds those it replaces."""
        forwards = self._forwards
        try:
            out = [h for h in headers if forwards[h[0]]]
        except KeyError:  # a name not seen yet (a plain dict: the look-up stays specialised)
            out = [h for h in headers if self._forwarded(h[0])]
        if named is None:
            named = dict(headers)  # (made in C: cheaper than a loop in Python)
        return out if b"connection" not in named else _without_connection_named(out, headers)

    def _forwarded(self, name: bytes) -> bool:
        verdict = self._forwards.get(name)
        if verdict is None:
            verdict = not _dropped_name(name)
            if len(self._forwards) < _MAX_NAMES:
                self._forwards[name] = verdict
        return verdict

    def to_client(self, headers: Headers) -> Headers:
        """The engine's ``headers`` a client may get; the gateway adds those it replaces."""
        relays = self._relays
        out = [h for h in headers if h[0] in relays]
        if not out or b"connection" not in dict(headers):
            return out
        return _without_connection_named(out, headers)


def _without_connection_named(out: Headers, headers: Headers) -> Headers:
    """``out`` without the headers that ``headers``' Connection names."""
    listed: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            listed.update(t.strip().lower() for t in value.split(b","))
    return [h for h in out if h[0] not in listed] if listed else out


DEFAULT_HEADERS = HeaderPolicy(TABLE)


def engine_query(query: bytes) -> bytes:
    """The client's query string without its credential-like parameters (``api_key``,
    ``access_token``, ``key``): the rest as sent, in order."""
    kept = [
        pair
        for pair in query.split(b"&")
        if pair and not _dropped_name(unquote_to_bytes(pair.partition(b"=")[0]).lower())
    ]
    return b"&".join(kept)


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
    try:
        raw = bytearray(_fresh.pop())  # (one pop: atomic, should threads share this)
    except IndexError:
        raw = bytearray(_refill())
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    h = raw.hex()
    return h.encode(), h, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}".encode()


# New ids' random bytes, 16 for each, drawn from the system 256 ids at a time: one
# getrandom system call (300 ns here) per 256 requests, not per request. A forked
# worker draws its own (the parent's are dropped in the child).
_IDS_PER_DRAW = 256
_fresh: list[bytes] = []
os.register_at_fork(after_in_child=_fresh.clear)


def _refill() -> bytes:
    drawn = os.urandom(16 * _IDS_PER_DRAW)
    _fresh[:] = [drawn[i : i + 16] for i in range(16, len(drawn), 16)]
    return drawn[:16]


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
