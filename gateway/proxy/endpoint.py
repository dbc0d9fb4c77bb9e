"""The proxy endpoint: read, check against the policy, forward, relay.

A raw ASGI callable rather than a Starlette request handler: it is the hot
path, it must watch for the client hanging up while the engine works, and it
answers errors itself once it knows whether the response has started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway._types import Headers, Receive, Scope, Send
from gateway.cutoff import Cutoff
from gateway.errors import GatewayError, RateLimited, RequestTimeout, ShuttingDown
from gateway.limits.limiter import Limiter, Ticket, reservation
from gateway.limits.meter import StreamMeter, answer_usage
from gateway.observe.exchange import Exchange
from gateway.policy.engine import apply_policy
from gateway.proxy.answers import check_head, whole_answer
from gateway.proxy.fanout import FanOut, fanout_bodies, include_usage, with_usage
from gateway.proxy.fingerprint import stamp_answer, stamp_events
from gateway.proxy.headers import (
    DROP_DOWNSTREAM,
    DROP_UPSTREAM,
    filter_headers,
    request_id_of,
    with_request_id,
)
from gateway.proxy.relay import error_end, relay_stream
from gateway.proxy.request import parse_request, read_body, request_content
from gateway.proxy.responder import Responder
from gateway.routing.hint import HINT
from gateway.state import GatewayState
from gateway.upstream.base import UpstreamResponse

logger = logging.getLogger("gateway")


async def _watch_disconnect(
    receive: Receive, cutoff: Cutoff, exchange: Exchange, responder: Responder
) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            # Servers also say "disconnect" once the response is complete.
            if cutoff.armed and not responder.complete:
                exchange.client_disconnected = True
                cutoff.cut("client left")
            return


@dataclass(slots=True)
class Prepared:
    """A request ready for the engine: its bodies, and what the rate limiter reserves by."""

    bodies: list[bytes]
    admitted: dict[str, Any]  # the body as the engine gets it (max_tokens, n)
    size: int  # its size in bytes (the prompt's estimate)
    fanout: int = 1
    include_usage: bool = False  # a fan-out stream must count usage
    hide: bool = False  # usage asked of the engine for metering, not shown to the client


class ProxyEndpoint:
    """ASGI endpoint for one OpenAI route (``route``) or a plain pass-through (None)."""

    # The engine's path for this route (None: the client's own path).
    upstream_path: str | None = None

    def __init__(self, state: GatewayState, *, route: str | None) -> None:
        self.state = state
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.state
        headers: Headers = scope["headers"]
        responder = Responder(send, request_id_of(headers))
        exchange = Exchange(
            method=scope["method"],
            path=scope["path"],
            route=self.route,
            request_id=responder.request_id.decode(),
        )
        tracer = state.tracer
        if tracer is not None:
            tracer.begin(exchange, headers)
        state.observer.started(exchange)
        ticket: Ticket | None = None
        try:
            if state.drain.draining:
                raise ShuttingDown(
                    "The gateway is shutting down; send the request again.",
                    headers={"Retry-After": "1", "Connection": "close"},
                )
            profile = None
            if state.authenticate is not None:
                exchange.client, profile = state.authenticate(headers)
            bodies = [b""]
            usage = hide = False
            if self.route is not None:
                raw = await self._read_body(receive, headers)
                if raw is None:
                    exchange.client_disconnected = True
                    return
                body = parse_request(raw, headers)
                if tracer is not None:
                    tracer.request(exchange, body)
                model = body.get("model")
                exchange.model = model if isinstance(model, str) else None
                if state.hinter is not None:
                    # From the body as sent: the policy may strip prompt_cache_key.
                    HINT.set(
                        state.hinter.hint(body, headers, client=exchange.client, profile=profile)
                    )
                prepared = await self._prepare(
                    raw, body, headers=headers, profile=profile, exchange=exchange
                )
                if state.limiter is not None:
                    ticket = await _admit(
                        state.limiter,
                        exchange,
                        profile,
                        prepared.admitted,
                        prepared.size,
                        prepared.fanout,
                    )
                    if ticket is not None:
                        responder.extra = ticket.headers
                bodies, usage, hide = prepared.bodies, prepared.include_usage, prepared.hide
                # Held for a stream's whole life otherwise (memory per open stream).
                del raw, body, prepared
            await self._forward(
                scope, receive, responder, exchange, bodies=bodies, include_usage=usage, hide=hide
            )
        except GatewayError as exc:
            exchange.error_code = exc.code
            if isinstance(exc, RateLimited):
                exchange.rate_limited = exc.limit
            if not responder.started:
                await responder.error(exc)
        except Exception as exc:
            exchange.error_code = "internal_error"
            logger.exception("unexpected error in the proxy", exc_info=exc)
            if not responder.started:
                await responder.error(GatewayError("The gateway failed to process the request."))
        finally:
            exchange.status = responder.status
            exchange.bytes_out = responder.bytes_out
            state.observer.finished(exchange)
            if ticket is not None and state.limiter is not None:
                await state.limiter.settle(ticket, exchange.usage, status=exchange.status)

    async def _prepare(
        self,
        raw: bytes,
        body: dict[str, Any],
        *,
        headers: Headers,
        profile: str | None,
        exchange: Exchange,
    ) -> Prepared:
        """The policy's verdict on ``body``, and what goes to the engine (one body, or n
        for a fan-out); a route with its own request shape overrides this."""
        decision = apply_policy(self.state.policy, self.route or "", body, profile=profile)
        exchange.outcomes = decision.outcomes
        if decision.error is not None:
            raise decision.error
        exchange.stream = decision.body.get("stream") is True
        usage = exchange.stream and include_usage(decision.body)
        # Metering asks a stream for its usage; the client never sees it unasked.
        hide = exchange.stream and not usage and self.state.settings.metering.stream_usage
        forwarded = with_usage(decision.body) if hide else decision.body
        if decision.fanout > 1:
            bodies = fanout_bodies(forwarded, decision.fanout)
        elif hide:
            bodies = [orjson.dumps(forwarded)]
        else:
            bodies = [request_content(raw, decision)]
        return Prepared(bodies, decision.body, len(raw), decision.fanout, usage, hide)

    def _upstream_headers(self, headers: Headers, request_id: bytes) -> Headers:
        out = with_request_id(filter_headers(headers, DROP_UPSTREAM), request_id)
        out.append((b"accept-encoding", b"identity"))
        if self.state.upstream_auth is not None:
            out.append((b"authorization", self.state.upstream_auth))
        return out

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        responder: Responder,
        exchange: Exchange,
        *,
        bodies: list[bytes],
        include_usage: bool,
        hide: bool,
    ) -> None:
        """Send ``bodies`` (one, or n for a fan-out) and answer, watching for the client
        leaving and the drain expiring; ``bodies`` is emptied once they are sent."""
        path: str = self.upstream_path or scope["path"]
        query: bytes = scope.get("query_string", b"")
        if query:
            path = f"{path}?{query.decode('latin-1')}"
        headers = self._upstream_headers(scope["headers"], responder.request_id)
        if self.state.tracer is not None:
            headers = self.state.tracer.upstream_headers(exchange, headers)
        state = self.state
        cutoff = Cutoff()
        watcher = asyncio.get_running_loop().create_task(
            _watch_disconnect(receive, cutoff, exchange, responder)
        )
        state.drain.register(cutoff)
        try:
            exchange.upstream_started = time.perf_counter()
            # One engine is the upstream URL; the balancer's answers name their replica.
            exchange.upstream_replica = state.settings.upstream.url
            if len(bodies) > 1:
                fanout = FanOut(
                    state.upstream,
                    limits=state.settings.limits,
                    responder=responder,
                    exchange=exchange,
                    cutoff=cutoff,
                    fingerprint=state.fingerprint(self.route),
                )
                await fanout.answer(
                    scope["method"],
                    path,
                    headers=headers,
                    bodies=bodies,
                    include_usage=include_usage,
                    hide_usage=hide,
                )
            else:
                response = await state.upstream.request(
                    scope["method"], path, headers=headers, body=bodies.pop()
                )
                del headers  # sent: not kept for the life of a stream
                exchange.upstream_status = response.status
                exchange.upstream_replica = getattr(response, "replica", exchange.upstream_replica)
                try:
                    await self._answer(response, responder, exchange, hide=hide)
                finally:
                    cutoff.disarm()
                    await response.aclose()
            reason = await cutoff.settle()
        except asyncio.CancelledError:
            reason = cutoff.caught()
            if reason is None:
                raise
        finally:
            watcher.cancel()
            state.drain.unregister(cutoff)
        if reason == "shutdown":
            await self._end_for_shutdown(responder)

    async def _end_for_shutdown(self, responder: Responder) -> None:
        """The drain time-out passed (a route whose streams end differently overrides it)."""
        await _end_for_shutdown(responder)

    async def _read_body(self, receive: Receive, headers: Headers) -> bytes | None:
        settings = self.state.settings
        cutoff = Cutoff()
        timer = asyncio.get_running_loop().call_later(
            settings.server.body_timeout, cutoff.cut, "body time-out"
        )
        try:
            raw = await read_body(receive, headers, settings.limits.max_body_bytes)
            if await cutoff.settle() is None:
                return raw
        except asyncio.CancelledError:
            if cutoff.caught() is None:
                raise
        finally:
            timer.cancel()
        raise RequestTimeout(
            "The request body was not received in time.", headers={"Connection": "close"}
        )

    async def _answer(
        self, response: UpstreamResponse, responder: Responder, exchange: Exchange, *, hide: bool
    ) -> None:
        headers = filter_headers(response.headers, DROP_DOWNSTREAM)
        limits = self.state.settings.limits
        trace = exchange.trace
        fingerprint = self.state.fingerprint(self.route)
        if check_head(response.status, headers, stream=exchange.stream):
            headers.append((b"cache-control", b"no-cache"))
            headers.append((b"x-accel-buffering", b"no"))
            await responder.start(response.status, headers)
            meter = StreamMeter(hide=hide)
            try:
                async for events in relay_stream(
                    response.chunks(), max_bytes=limits.max_stream_bytes, on_error=exchange.failed
                ):
                    chunk = meter.feed(events)
                    if not chunk:
                        continue
                    if fingerprint is not None:
                        chunk = stamp_events(chunk, fingerprint)
                    if exchange.first_byte is None:
                        exchange.first_byte = time.perf_counter()
                    if trace is not None:
                        trace.events(chunk)
                    await responder.body(chunk, more=True)
                await responder.body(b"")
            except OSError:
                # The client hung up; the caller closes the engine's response.
                exchange.client_disconnected = True
            finally:
                exchange.usage = meter.usage
            return
        data = await response.read(limits.max_response_bytes)
        exchange.first_byte = time.perf_counter()
        if response.status < 400:
            exchange.usage = answer_usage(data)
        if trace is not None and response.status < 400:
            trace.answer(data)
        if fingerprint is not None and response.status < 400:
            data = stamp_answer(data, fingerprint)
        headers, data = whole_answer(response.status, headers, data)
        await responder.start(response.status, headers)
        await responder.body(data)


async def _admit(
    limiter: Limiter,
    exchange: Exchange,
    profile: str | None,
    body: dict[str, Any],
    size: int,
    n: int,
) -> Ticket | None:
    """The request's hold on its key's limits, reserving its worst case in tokens."""
    tokens = reservation(
        body, body_bytes=size, default_max_tokens=limiter.config.default_max_tokens, n=n
    )
    return await limiter.admit(exchange.client, profile, tokens=tokens)


async def _end_for_shutdown(responder: Responder) -> None:
    """The drain time-out passed: a 503 if nothing was sent, else end the stream."""
    exc = ShuttingDown(
        "The gateway is shutting down; the request was ended before it was complete.",
        headers={"Retry-After": "1", "Connection": "close"},
    )
    if not responder.started:
        raise exc
    if not responder.complete:
        with contextlib.suppress(OSError):
            await responder.body(error_end(exc), more=True)
            await responder.body(b"")
