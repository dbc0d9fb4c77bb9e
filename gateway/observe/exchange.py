"""One proxied request as the operator sees it, and the observers that record it.

The proxy fills an Exchange as the request goes (policy outcomes, engine status,
time to first byte, bytes sent) and hands it to the Observer when it ends:
metrics and the access log are Observers. Nothing here touches request bodies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway._types import Headers
from gateway.errors import GatewayError
from gateway.limits.meter import Usage
from gateway.policy.engine import Outcome, Report

# The route label of a request to a path the gateway does not serve (one label for
# all: the paths are the client's to choose, so they are never labels themselves).
UNSERVED = "(unserved)"


@dataclass(slots=True)
class Exchange:
    """What happened to one request."""

    method: str
    path: str
    route: str | None
    request_id: str
    started: float = field(default_factory=time.perf_counter)
    model: str | None = None
    client: str | None = None  # the API key's name, when keys are on
    stream: bool = False
    status: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    # What report-only rules would have refused, and the 400 the client would have got.
    report: Report | None = None
    error_code: str | None = None
    upstream_status: int | None = None
    upstream_replica: str | None = None  # the engine replica that answered
    upstream_started: float | None = None
    first_byte: float | None = None  # engine's first body byte (streams) or headers
    bytes_out: int = 0
    client_disconnected: bool = False
    trace: TraceHooks | None = None  # its spans, when tracing is on
    policed: bool = True  # False: a route the policy has no say in (a 404, a stored response)
    usage: Usage | None = None  # the tokens the engine reported
    rate_limited: str | None = None  # the limit that refused the request (429)

    def failed(self, exc: GatewayError) -> None:
        """Record an error the client was told about (as a status or, mid-stream, an event)."""
        self.error_code = exc.code


class TraceHooks(Protocol):
    """One request's trace, told what the answer said (observe/tracing.py's Trace)."""

    def answer(self, data: bytes) -> None: ...

    def events(self, events: bytes) -> None: ...


class Observer(Protocol):
    """Told when each request starts and ends."""

    def started(self, exchange: Exchange) -> None: ...

    def finished(self, exchange: Exchange) -> None: ...


class Tracer(Observer, Protocol):
    """Opens each request's spans (observe/tracing.py's Tracing, built only when on)."""

    dropped: int

    def begin(self, exchange: Exchange, headers: Headers) -> None: ...

    def request(self, exchange: Exchange, body: dict[str, Any]) -> None: ...

    def upstream_headers(self, exchange: Exchange, headers: Headers) -> Headers: ...

    def shutdown(self, timeout: float = 5.0) -> None: ...


class NullObserver:
    """Records nothing."""

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        return None


class Observers:
    """Tells several observers, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers

    def started(self, exchange: Exchange) -> None:
        for observer in self.observers:
            observer.started(exchange)

    def finished(self, exchange: Exchange) -> None:
        for observer in self.observers:
            observer.finished(exchange)
