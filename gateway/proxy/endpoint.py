"""The proxy's entry: one ASGI endpoint per route, one Call per request.

A raw ASGI callable rather than a Starlette request handler: it is the hot
path, it must watch for the client hanging up while the engine works, and it
answers errors itself once it knows whether the response has started. The
path of a request, entry to engine and back (docs/requests.md draws it):
``__call__`` makes the Call, reads and parses the body, asks the route to
prepare it (policy, translation), admits it by the limiter, and ``_forward``
sends it to the upstream of its model (the engines' seam), n times for a
fan-out, then hands the answer to ``reply`` (whole or through the one relay);
the Call's record goes to the observers at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import NamedTuple

import orjson

from gateway._types import Headers, Receive, Scope, Send
from gateway.cutoff import Cutoff
from gateway.errors import (
    GatewayError,
    Overloaded,
    RateLimited,
    RequestTimeout,
    ShuttingDown,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from gateway.jsonbody.parse import parse_request
from gateway.limits.limiter import Ticket, reservation
from gateway.proxy.call import Call
from gateway.proxy.fanout import fan_out
from gateway.proxy.firstmessage import take_first
from gateway.proxy.headers import engine_query, with_request_id
from gateway.proxy.openai import error_end
from gateway.proxy.reply import reply
from gateway.proxy.request import read_body
from gateway.proxy.route import Prepared, Route
from gateway.proxy.watch import Watch
from gateway.routing.hint import BATCH, Hint
from gateway.state import GatewayState

logger = logging.getLogger("gateway")
# Where a deployment's failover takes the request: nothing was sent to an engine (every
# replica out, none reachable, or the queue shed it).
FAILOVER_ON = (UpstreamUnavailable, UpstreamUnreachable, Overloaded)
# The scope key of an in-process request's Caller (an endpoint made ``inprocess`` only).
CALLER = "ft_gateway.caller"


class Caller(NamedTuple):
    """Who an in-process request (a batch's line) is made for, in place of credentials:
    the key's name and profile (the policy's overlay, the limits) and the owner of what
    it stores."""

    client: str | None
    profile: str | None
    owner: str


def _client_left(cutoff: Cutoff, call: Call) -> None:
    # Servers also say "disconnect" once the response is complete.
    if cutoff.armed and not call.responder.complete:
        call.record.client_disconnected = True
        cutoff.cut("client left")


class ProxyEndpoint:
    """ASGI endpoint for one route."""

    def __init__(self, state: GatewayState, route: Route, *, inprocess: bool = False) -> None:
        self.state = state
        self.route = route
        # Called in process (a batch's lines, gateway/batches/): the scope's Caller says
        # whose the request is, and it waits behind interactive ones.
        self.inprocess = inprocess
        self.upstream_path = route.upstream_path  # (a class attribute: read once, here)
        self.forward_query = route.forward_query
        # The route's Call with its name bound: made in C, one look-up per request.
        self.new_call = functools.partial(route.call_type, route.name)
        self.headers = route.headers  # what crosses each way (the route's table)
        # Restart-only settings (a reload never changes them), read once, here: each
        # read of a pydantic model's attribute costs a slow look-up.
        settings = state.settings
        self.body_timeout = settings.server.body_timeout
        self.max_body_bytes = settings.limits.max_body_bytes
        self.limits = settings.limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.state
        route = self.route
        headers: Headers = scope["headers"]
        call = self.new_call(scope, send)
        record, responder = call.record, call.responder
        tracer = state.tracer
        if tracer is not None:
            tracer.begin(record, headers)
        state.observer.started(record)
        ticket: Ticket | None = None
        authenticated = False
        try:
            if state.drain.draining:
                raise ShuttingDown(
                    "The gateway is shutting down; send the request again.",
                    headers={"Retry-After": "1", "Connection": "close"},
                )
            if self.inprocess:
                caller: Caller = scope[CALLER]
                record.client, call.profile, call.owner = caller
            elif state.authenticate is not None:
                record.client, call.profile = state.authenticate(headers)
            authenticated = True
            bodies = [b""]
            if route.name is not None:
                raw = await self._read_body(receive, call)
                if raw is None:
                    record.client_disconnected = True
                    return
                body = parse_request(raw, headers, call.named)
                if state.capture is not None:
                    state.capture.record(route.name, call.profile, body, len(raw))
                if tracer is not None:
                    tracer.request(record, body)
                model = body.get("model")
                record.model = model if isinstance(model, str) else None
                router = state.router
                if router is not None:
                    # The model picks the deployment, before its policy sees the body.
                    target = router.route(call, body, route.content)
                    if target is not None and target.alias:
                        body = {**body, "model": target.served}
                        raw = orjson.dumps(body)
                served = state.served
                if served is not None and record.model not in served.names:
                    await served.admit(record.model)  # (a name it lacks: read, or refused)
                if state.hinter is not None:
                    # From the body as sent: the policy may strip prompt_cache_key.
                    call.hint = state.hinter.hint(
                        body,
                        headers,
                        client=record.client,
                        profile=call.profile,
                        content=route.content,
                    )
                prepared = await route.prepare(call, raw, body)
                if self.inprocess:
                    hint = call.hint
                    call.hint = Hint(hint.source, hint.key, BATCH)
                if state.limiter is not None:
                    ticket = await self._admit(call, prepared)
                bodies = prepared.bodies
                # Held for a stream's whole life otherwise (memory per open stream).
                del raw, body, prepared
            await self._forward(call, scope, receive, bodies)
        except GatewayError as exc:
            if authenticated and ticket is None and state.limiter is not None:
                exc = await self._charged(call, exc)
            record.failed(exc)
            if isinstance(exc, RateLimited):
                record.rate_limited = exc.limit
            if not responder.started:
                await responder.error(exc)
        except Exception as exc:
            record.error_code = "internal_error"
            logger.exception("unexpected error in the proxy", exc_info=exc)
            if not responder.started:
                await responder.error(GatewayError("The gateway failed to process the request."))
        finally:
            record.status = responder.status
            record.bytes_out = responder.bytes_out
            state.observer.finished(record)
            if ticket is not None and state.limiter is not None:
                status = record.status
                if not status and record.client_disconnected and record.upstream_started:
                    # Left before its answer, after the engine was asked: the engine did
                    # the work, so it is charged as an answer that reported no usage.
                    status = record.upstream_status or 200
                await state.limiter.settle(ticket, record.usage, status=status)

    async def _admit(self, call: Call, prepared: Prepared) -> Ticket | None:
        """The request's hold on its key's limits, reserving its worst case in tokens."""
        limiter = self.state.limiter
        if limiter is None:
            return None
        tokens = reservation(
            prepared.admitted,
            body_bytes=prepared.size,
            default_max_tokens=limiter.config.default_max_tokens,
            n=prepared.fanout,
            fields=prepared.fields,
        )
        target = call.target  # an alias counts against the model it names
        model = call.record.model if target is None else target.served
        ticket = await limiter.admit(call.record.client, call.profile, tokens=tokens, model=model)
        if ticket is not None:
            call.responder.extra = ticket.headers
        return ticket

    async def _charged(self, call: Call, exc: GatewayError) -> GatewayError:
        """A request refused after authentication, before the limiter admitted it (its
        body, its model, the policy): one request of its key all the same
        (docs/limits.md), so refusals are no way past the limits. Its 4xx, or the 429
        once the key's requests per minute are spent."""
        limiter = self.state.limiter
        if limiter is None or not 400 <= exc.status < 500 or isinstance(exc, RateLimited):
            return exc
        try:
            call.responder.extra = await limiter.charge(call.record.client, call.profile)
        except RateLimited as limited:
            return limited
        return exc

    def _upstream_headers(self, call: Call, auth: bytes | None) -> Headers:
        out = with_request_id(
            self.headers.to_engine(call.headers, call.named),
            call.responder.request_id,
            call.engine_id,
        )
        out.append((b"accept-encoding", b"identity"))
        if auth is not None:
            out.append((b"authorization", auth))
        tracer = self.state.tracer
        return out if tracer is None else tracer.upstream_headers(call.record, out)

    async def _forward(
        self, call: Call, scope: Scope, receive: Receive, bodies: list[bytes]
    ) -> None:
        """Send ``bodies`` (one, or n for a fan-out) and answer, watching for the client
        leaving and the drain expiring; ``bodies`` is emptied once they are sent."""
        state = self.state
        record = call.record
        path: str = self.upstream_path or scope["path"]
        query: bytes = scope.get("query_string", b"")
        if query and self.forward_query:
            query = engine_query(query)
            if query:
                path = f"{path}?{query.decode('latin-1')}"
        target = call.target
        engine = state.engines.default if target is None else target.engine
        headers = self._upstream_headers(call, engine.auth)
        cutoff = call.cutoff = Cutoff(call.task)
        watcher = Watch(receive, _client_left, cutoff, call)
        state.drain.register(cutoff)
        try:
            record.upstream_started = time.perf_counter()
            # One engine is the upstream URL; the balancer's answers name their replica.
            record.upstream_replica = engine.replica
            method: str = scope["method"]
            if len(bodies) > 1:
                fanned = fan_out(
                    engine.upstream, call, limits=state.settings.limits, headers=self.headers
                )
                response = await fanned.start(method, path, headers=headers, bodies=bodies)
            else:
                fanned = None
                body = bodies.pop()
                try:
                    response = await engine.upstream.request(
                        method, path, headers=headers, body=body, hint=call.hint
                    )
                except FAILOVER_ON:
                    failover = engine.failover
                    if failover is None:
                        raise
                    # Nothing reached an engine: the same model, served by the next deployment.
                    record.deployment = failover.name
                    record.upstream_replica = failover.replica
                    headers = self._upstream_headers(call, failover.auth)
                    response = await failover.upstream.request(
                        method, path, headers=headers, body=body, hint=call.hint
                    )
                del body
            del headers  # sent: not kept for the life of a stream
            record.upstream_status = response.status
            record.upstream_replica = getattr(response, "replica", record.upstream_replica)
            try:
                await reply(call, self.route, response, self.limits)
                if fanned is not None:
                    record.usage = fanned.usage  # every engine request's, the prompt n times
            finally:
                cutoff.disarm()
                await response.aclose()
            reason = None if cutoff.settled() else await cutoff.settle()
        except asyncio.CancelledError:
            reason = cutoff.caught()
            if reason is None:
                raise
        finally:
            watcher.close()
            state.drain.unregister(cutoff)
        if reason == "shutdown":
            await _end_for_shutdown(call)

    async def _read_body(self, receive: Receive, call: Call) -> bytes | None:
        message, rest = take_first(receive)
        if message is not None and not message.get("more_body", False):
            # The whole body came with the head (most requests): it is read at once,
            # with no time-out to arm (firstmessage.py says why that is worth it).
            return await read_body(
                receive, call.headers, self.max_body_bytes, call.named, first=message
            )
        cutoff = Cutoff(call.task)
        timer = asyncio.get_running_loop().call_later(
            self.body_timeout, cutoff.cut, "body time-out"
        )
        try:
            raw = await read_body(
                receive, call.headers, self.max_body_bytes, call.named, message, rest
            )
            if cutoff.settled() or await cutoff.settle() is None:
                return raw
        except asyncio.CancelledError:
            if cutoff.caught() is None:
                raise
        finally:
            timer.cancel()
        raise RequestTimeout(
            "The request body was not received in time.", headers={"Connection": "close"}
        )


async def _end_for_shutdown(call: Call) -> None:
    """The drain time-out passed: a 503 if nothing was sent, else end the stream the
    way its route ends a broken one (and the record says so)."""
    exc = ShuttingDown(
        "The gateway is shutting down; the request was ended before it was complete.",
        headers={"Retry-After": "1", "Connection": "close"},
    )
    responder = call.responder
    if not responder.started:
        raise exc
    if not responder.complete:
        call.record.failed(exc)
        end = call.shaper.fail(exc) if call.shaper is not None else error_end(exc)
        with contextlib.suppress(OSError):
            await responder.body(end, more=True)
            await responder.body(b"")
