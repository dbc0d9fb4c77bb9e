"""One proxied request as the operator sees it, and the observers that record it.

The Exchange is the record of a request's Call (proxy/call.py): the call writes
it as the request goes (policy outcomes, engine status, time to first byte,
usage) and hands it, finished, to the Observer when it ends: metrics, the
access log and tracing are Observers, and they read what it holds, computing
nothing twice (``verdict``). Nothing here touches request bodies.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from gateway._types import Headers
from gateway.errors import AnswerViolation, GatewayError
from gateway.limits.meter import Usage
from gateway.policy.engine import REJECTED, Outcome, Report

# The route label of a request to a path the gateway does not serve (one label for
# all: the paths are the client's to choose, so they are never labels themselves).
UNSERVED = "(unserved)"


class Exchange:
    """What happened to one request: its record."""

    # Slots, every one set in __init__: a read of a field left at a class default
    # cannot be specialised by the interpreter (each costs a dictionary miss and a
    # class look-up), and the observers read most fields of every record.
    __slots__ = (
        "method",
        "path",
        "route",
        "request_id",
        "started",
        "model",
        "deployment",
        "served",
        "client",
        "stream",
        "status",
        "outcomes",
        "report",
        "error_code",
        "upstream_status",
        "upstream_replica",
        "upstream_started",
        "first_byte",
        "bytes_out",
        "client_disconnected",
        "trace",
        "policed",
        "usage",
        "rate_limited",
        "engine_error",
        "answers",
        "_verdict",
    )

    def __init__(
        self,
        method: str,
        path: str,
        route: str | None,
        request_id: str,
        *,
        started: float | None = None,
        **fields: Any,
    ) -> None:
        self.method = method
        self.path = path
        self.route = route
        self.request_id = request_id
        self.started = time.perf_counter() if started is None else started
        self.model: str | None = None
        self.deployment: str | None = None  # a fleet's deployment that served it (its name)
        self.served: str | None = None  # the model name its engine got (a fleet's, from the config)
        self.client: str | None = None  # the API key's name, when keys are on
        self.stream = False
        self.status = 0
        self.outcomes: Sequence[Outcome] = ()
        # What report-only rules would have refused, and the 400 the client would have got.
        self.report: Report | None = None
        self.error_code: str | None = None
        self.upstream_status: int | None = None
        self.upstream_replica: str | None = None  # the engine replica that answered
        self.upstream_started: float | None = None
        self.first_byte: float | None = None  # engine's first body byte (streams) or headers
        self.bytes_out = 0
        self.client_disconnected = False
        self.trace: TraceHooks | None = None  # its spans, when tracing is on
        self.policed = True  # False: a route the policy has no say in (a 404, a stored response)
        self.usage: Usage | None = None  # the tokens the engine reported
        self.rate_limited: str | None = None  # the limit that refused the request (429)
        self.engine_error = False  # the error the client got is the engine's own answer
        # What the answer checks found (enforced: the error the client got; or reported).
        self.answers: tuple[AnswerViolation, ...] = ()
        self._verdict: str | None = None
        if not fields:
            return
        for name, value in fields.items():
            if name not in _FIELDS:
                raise TypeError(f"Exchange has no field {name!r}")
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"Exchange({self.method} {self.path} {self.status} {self.request_id})"

    def failed(self, exc: GatewayError) -> None:
        """Record an error the client was told about (as a status or, mid-stream, an event)."""
        self.error_code = exc.code

    def relayed_error(self, error: dict[str, Any]) -> None:
        """Record the engine's error answer the client got (normalised): its code, or
        its type where it has none."""
        self.error_code = error.get("code") or error.get("type")
        self.engine_error = True

    @property
    def verdict(self) -> str | None:
        """What the policy did to this request, in one word: ``rejected``, ``changed``
        (any action but neutral) or ``passed``; worked out once, for the access log, the
        metrics and the trace alike; None where no policy applies (a 404, a stored
        response)."""
        found = self._verdict
        if found is None and self.route is not None and self.policed:
            found = "passed"
            for outcome in self.outcomes:
                if outcome.action == REJECTED:
                    found = "rejected"
                    break
                if outcome.action != "neutral":
                    found = "changed"
            self._verdict = found
        return found


_FIELDS = frozenset(name for name in Exchange.__slots__ if not name.startswith("_"))


class TraceHooks(Protocol):
    """One request's trace, told what the answer said (observe/tracing.py's Trace)."""

    def answer(self, body: Any) -> None: ...

    def chunks(self, chunks: list[Any]) -> None: ...


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

    ignores_start = True

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        return None


class Observers:
    """Tells several observers, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers
        # Those told of a start: not those that say they ignore it (the access log).
        self._starting = tuple(o for o in observers if not getattr(o, "ignores_start", False))

    def started(self, exchange: Exchange) -> None:
        for observer in self._starting:
            observer.started(exchange)

    def finished(self, exchange: Exchange) -> None:
        for observer in self.observers:
            observer.finished(exchange)
