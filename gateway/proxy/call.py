"""One request on its way through the gateway: the Call, built once at the entry.

As uvicorn gives each request its own cycle object, the endpoint gives each
request a Call and passes it down: what belongs to one request lives here and
nowhere else (no context variable, no field of a shared object). The route
prepares it, the balancer reads its hint, the relay and the route's shaper
write its record, the drain cuts it through its cutoff, and the observers read
the record once it is finished.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from gateway._types import Headers, Scope, Send
from gateway.cutoff import Cutoff
from gateway.observe.exchange import Exchange
from gateway.policy.engine import Policy
from gateway.proxy.headers import request_ids
from gateway.proxy.responder import Responder
from gateway.proxy.shaper import StreamShaper
from gateway.routing.hint import NO_HINT, Hint
from gateway.upstream.engines import Target


class Call:
    """One request: its responder, its record, its profile, its routing hint, its cutoff,
    its stream shaper once the answer streams, and its route's own state (``plan``).
    A route whose clients speak another API makes a subclass with that API's
    ``responder_type`` (its error shape and headers: gateway/messages/call.py)."""

    responder_type: ClassVar[type[Responder]] = Responder

    # Slots, every one set in __init__: a field read at a class default would cost the
    # interpreter a dictionary miss and a class look-up each time.
    __slots__ = (
        "headers",
        "task",
        "named",
        "engine_id",
        "responder",
        "record",
        "profile",
        "hint",
        "target",
        "policy",
        "cutoff",
        "shaper",
        "plan",
        "hide",
        "include_usage",
        "owner",
    )

    def __init__(self, route: str | None, scope: Scope, send: Send) -> None:
        self.headers: Headers = scope["headers"]  # the client's request headers
        try:
            self.task = asyncio.current_task()  # the request's (its cutoffs cancel it)
        except RuntimeError:  # made outside a running loop (a bench's lookup, a test)
            self.task = None
        # The headers by name where no name repeats (most requests), else None: then a
        # look-up in it gives what a scan of the list would, and the dict is made in C
        # (request_ids, read_body and parse_request each save a loop in Python).
        named = dict(self.headers)
        self.named = named if len(named) == len(self.headers) else None
        request_id, text, self.engine_id = request_ids(self.headers, self.named)
        self.responder = self.responder_type(send, request_id)
        self.record = Exchange(scope["method"], scope["path"], route, text)
        self.profile: str | None = None  # the API key's policy profile
        self.hint: Hint = NO_HINT  # what the balancer picks a replica by
        self.target: Target | None = None  # a fleet's deployment of the request's model
        self.policy: Policy | None = None  # its policy (None: the gateway's live one)
        self.cutoff: Cutoff | None = None  # set while the engine is asked
        self.shaper: StreamShaper | None = None  # set once a stream's answer starts
        self.plan: Any = None  # the route's own state between prepare and answer
        self.hide = False  # usage asked of the engine for metering, not shown to the client
        self.include_usage = False  # the client asked a stream for its usage
        self.owner: str | None = None  # who may read what it stores (None: its credentials')
