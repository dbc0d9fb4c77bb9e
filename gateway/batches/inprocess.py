"""One line of a batch sent through the gateway's own endpoint, in process.

A line is the request a client would have made, so it goes the way that
request would: the same ProxyEndpoint and route object (the fleet's model
routing and that deployment's policy, the limits of the batch's key, the
upstream seam with its queue and failover, fan-out for ``n``, the route's
shaping of the answer such as the system_fingerprint, the access log, the
metrics and the trace). It is an ASGI call with a hand-written ``receive`` and
``send`` rather than HTTP to the gateway's own port: nothing is parsed twice,
no socket or connection slot is taken from clients, the line needs no
credential (its Caller says whose it is), and a runner in any worker reaches
its own process's engines. The endpoint is made ``inprocess``, which is what
lets the scope name the Caller and puts the line behind interactive requests
in the queue.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from gateway._types import Headers, Message
from gateway.proxy.endpoint import CALLER, Caller, ProxyEndpoint


@dataclass(slots=True)
class Answer:
    """What a client would have been sent."""

    status: int = 0
    headers: Headers = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)


async def send_line(
    endpoint: ProxyEndpoint,
    path: str,
    body: bytes,
    *,
    caller: Caller,
    request_id: str,
    traceparent: str | None = None,
) -> Answer:
    """POST ``body`` to ``path`` through ``endpoint`` as ``caller``; the whole answer."""
    headers: Headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
    ]
    if traceparent is not None:
        headers.append((b"traceparent", traceparent.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": None,
        "server": None,
        CALLER: caller,
    }
    sent = False
    never = asyncio.Event()  # no disconnect: the line's task is cancelled instead

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    answer = Answer()

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    await endpoint(scope, receive, send)
    return answer
