"""One HTTP request that Envoy asks the processor about, from its headers to its answer's
headers: the processor's per-request object, as proxy/call.py's Call is the proxy's."""

from __future__ import annotations

import time
import uuid

from gateway._types import Headers
from gateway.observe.exchange import Exchange
from gateway.routes import ROUTES


class Request:
    """A request's headers (names in lower case, as HTTP/2 and Envoy give them), its
    route (None: a path or method the policy has no say in), its record and profile."""

    __slots__ = ("headers", "named", "route", "record", "profile", "body", "finished")

    def __init__(self, headers: Headers, *, started: float | None = None) -> None:
        self.headers = headers
        named = dict(headers)
        # By name where no name repeats (parse_request reads the content type from it).
        self.named = named if len(named) == len(headers) else None
        method = named.get(b":method", b"").decode("latin-1")
        path = named.get(b":path", b"/").decode("latin-1").partition("?")[0]
        self.route = path if method == "POST" and path in ROUTES else None
        # Envoy's own (its HTTP connection manager makes one unless told not to), so the
        # processor's log line and Envoy's access log name a request alike.
        request_id = named.get(b"x-request-id", b"").decode("latin-1") or uuid.uuid4().hex
        self.record = Exchange(
            method, path, self.route, request_id, started=started or time.perf_counter()
        )
        self.profile: str | None = None  # the API key's policy profile
        self.body: list[bytes] = []  # the body's parts while Envoy sends it in several
        self.finished = False  # the record went to the observers

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name``."""
        if self.named is not None:
            return self.named.get(name)
        return next((v for n, v in self.headers if n == name), None)
