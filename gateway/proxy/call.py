"""One request on its way through the gateway: the Call, built once at the entry.

As uvicorn gives each request its own cycle object, the endpoint gives each
request a Call and passes it down: what belongs to one request lives here and
nowhere else (no context variable, no field of a shared object). The route
prepares it, the balancer reads its hint, the relay and the route's shaper
write its record, the drain cuts it through its cutoff, and the observers read
the record once it is finished.
"""

from __future__ import annotations

from typing import Any

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
    its stream shaper once the answer streams, and its route's own state (``plan``)."""

    # What most requests leave as it is: class defaults, so a call sets only what it has.
    profile: str | None = None  # the API key's policy profile
    hint: Hint = NO_HINT  # what the balancer picks a replica by
    target: Target | None = None  # a fleet's deployment of the request's model
    policy: Policy | None = None  # its policy (None: the gateway's live one)
    cutoff: Cutoff | None = None  # set while the engine is asked
    shaper: StreamShaper | None = None  # set once a stream's answer starts
    plan: Any = None  # the route's own state between prepare and answer
    hide = False  # usage asked of the engine for metering, not shown to the client
    include_usage = False  # the client asked a stream for its usage

    def __init__(self, route: str | None, scope: Scope, send: Send) -> None:
        self.headers: Headers = scope["headers"]  # the client's request headers
        request_id, text, self.engine_id = request_ids(self.headers)
        self.responder = Responder(send, request_id)
        self.record = Exchange(scope["method"], scope["path"], route, text)
