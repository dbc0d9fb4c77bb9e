"""The proxy endpoint: read, check against the policy, forward, relay.

A raw ASGI callable rather than a Starlette request handler: it is the hot
path, it must watch for the client hanging up while the engine works, and it
answers errors itself once it knows whether the response has started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import orjson

from gateway.answers import check_head, check_json_body
from gateway.cutoff import Cutoff
from gateway.duplicatekeys import check_duplicate_keys
from gateway.engineerrors import normalise_error_body
from gateway.errors import (
    BodyTooLarge,
    GatewayError,
    InvalidRequest,
    RequestTimeout,
    ShuttingDown,
    UnsupportedMediaType,
)
from gateway.exchange import Exchange
from gateway.policy import Decision, apply_policy
from gateway.relay import DONE, relay_stream, sse_error_event
from gateway.upstream import Headers, UpstreamResponse

if TYPE_CHECKING:
    from gateway.app import GatewayState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

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
# Never sent upstream: the engine's Host is its own, the body length is ours,
# the client's key is not the engine's, and compression would stop us reading
# error bodies.
_DROP_UPSTREAM = HOP_BY_HOP | {
    b"host",
    b"content-length",
    b"authorization",
    b"accept-encoding",
    b"expect",
    b"x-request-id",
    b"cookie",
}
_DROP_DOWNSTREAM = HOP_BY_HOP | {b"content-length", b"date", b"server", b"x-request-id"}
_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:\-]{1,128}$")
_JSON = b"application/json"
logger = logging.getLogger("gateway")


def request_id_of(headers: Headers) -> bytes:
    """The client's X-Request-ID when it is sane, else a new one."""
    for name, value in headers:
        if name == b"x-request-id" and _REQUEST_ID.match(value):
            return value
    # 128 random bits in hex, like uuid4().hex, without building a UUID (5x cheaper).
    return os.urandom(16).hex().encode()


def _connection_tokens(headers: Headers) -> frozenset[bytes]:
    tokens: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
    return frozenset(tokens)


def filter_headers(headers: Headers, drop: frozenset[bytes]) -> Headers:
    """``headers`` without ``drop`` and without what ``Connection`` names."""
    named = _connection_tokens(headers)
    return [(n, v) for n, v in headers if n not in drop and n not in named]


async def read_body(receive: Receive, headers: Headers, limit: int) -> bytes | None:
    """The whole request body; None if the client left while sending it."""
    framing = 0
    for name, value in headers:
        if name == b"transfer-encoding":
            framing |= 1
        elif name == b"content-length":
            framing |= 2
            try:
                declared = int(value)
            except ValueError:
                raise InvalidRequest(
                    "Invalid Content-Length header.", code="invalid_header"
                ) from None
            if declared > limit:
                raise BodyTooLarge(
                    f"Request body is larger than this gateway's limit of {limit} bytes."
                )
    if framing == 3:
        # RFC 9112 6.3: a request with both may be smuggling one past a proxy; h11
        # lets it through (httptools refuses it), so refuse and close here.
        raise InvalidRequest(
            "Request has both Content-Length and Transfer-Encoding.",
            code="invalid_header",
            headers={"Connection": "close"},
        )
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(
                    f"Request body is larger than this gateway's limit of {limit} bytes."
                )
            parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


def parse_request(raw: bytes, headers: Headers) -> dict[str, Any]:
    """The request body as a JSON object, or an InvalidRequest saying what is wrong."""
    for name, value in headers:
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            if media != _JSON and not media.endswith(b"+json"):
                raise UnsupportedMediaType(
                    "Request body must be JSON: send 'Content-Type: application/json'.",
                    code="unsupported_media_type",
                )
    if not raw.strip():
        raise InvalidRequest(
            "We could not parse the JSON body of your request: the body is empty.",
            code="invalid_json",
        )
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"We could not parse the JSON body of your request: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.", code="invalid_json")
    check_duplicate_keys(raw, data)
    return data


def request_content(raw: bytes, decision: Decision) -> bytes:
    """The body sent to the engine: the client's bytes unless the policy changed it."""
    return orjson.dumps(decision.body) if decision.changed else raw


class Responder:
    """Sends one response; remembers whether it started."""

    def __init__(self, send: Send, request_id: bytes) -> None:
        self._send = send
        self.request_id = request_id
        self.started = False
        self.complete = False
        self.status = 0
        self.bytes_out = 0

    async def start(self, status: int, headers: Headers) -> None:
        self.started = True
        self.status = status
        headers.append((b"x-request-id", self.request_id))
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, *, more: bool = False) -> None:
        self.bytes_out += len(data)
        self.complete = not more
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def error(self, exc: GatewayError) -> None:
        payload = orjson.dumps(exc.openai_error())
        headers: Headers = [
            (b"content-type", _JSON),
            (b"content-length", str(len(payload)).encode()),
        ]
        headers.extend((k.lower().encode(), v.encode()) for k, v in exc.headers.items())
        await self.start(exc.status, headers)
        await self.body(payload)


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


class ProxyEndpoint:
    """ASGI endpoint for one OpenAI route (``route``) or a plain pass-through (None)."""

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
        state.observer.started(exchange)
        try:
            if state.drain.draining:
                raise ShuttingDown(
                    "The gateway is shutting down; send the request again.",
                    headers={"Retry-After": "1", "Connection": "close"},
                )
            profile = None
            if state.authenticate is not None:
                exchange.client, profile = state.authenticate(headers)
            content = b""
            if self.route is not None:
                raw = await self._read_body(receive, headers)
                if raw is None:
                    exchange.client_disconnected = True
                    return
                body = parse_request(raw, headers)
                model = body.get("model")
                exchange.model = model if isinstance(model, str) else None
                decision = apply_policy(state.policy, self.route, body, profile=profile)
                exchange.outcomes = decision.outcomes
                if decision.error is not None:
                    raise decision.error
                content = request_content(raw, decision)
                exchange.stream = decision.body.get("stream") is True
                # Held for a stream's whole life otherwise (memory per open stream).
                del raw, body, decision
            await self._forward(scope, receive, responder, exchange, content=content)
        except GatewayError as exc:
            exchange.error_code = exc.code
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

    def _upstream_headers(self, headers: Headers, request_id: bytes) -> Headers:
        out = filter_headers(headers, _DROP_UPSTREAM)
        out.append((b"x-request-id", request_id))
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
        content: bytes,
    ) -> None:
        path: str = scope["path"]
        query: bytes = scope.get("query_string", b"")
        if query:
            path = f"{path}?{query.decode('latin-1')}"
        headers = self._upstream_headers(scope["headers"], responder.request_id)
        state = self.state
        cutoff = Cutoff()
        watcher = asyncio.get_running_loop().create_task(
            _watch_disconnect(receive, cutoff, exchange, responder)
        )
        state.drain.register(cutoff)
        try:
            exchange.upstream_started = time.perf_counter()
            response = await state.upstream.request(
                scope["method"], path, headers=headers, body=content
            )
            del content, headers  # sent: not kept for the life of a stream
            exchange.upstream_status = response.status
            try:
                await self._answer(response, responder, exchange)
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
        self, response: UpstreamResponse, responder: Responder, exchange: Exchange
    ) -> None:
        headers = filter_headers(response.headers, _DROP_DOWNSTREAM)
        limits = self.state.settings.limits
        if check_head(response.status, headers, stream=exchange.stream):
            headers.append((b"cache-control", b"no-cache"))
            headers.append((b"x-accel-buffering", b"no"))
            await responder.start(response.status, headers)
            try:
                async for chunk in relay_stream(
                    response.chunks(), max_bytes=limits.max_stream_bytes, on_error=exchange.failed
                ):
                    if exchange.first_byte is None:
                        exchange.first_byte = time.perf_counter()
                    await responder.body(chunk, more=True)
                await responder.body(b"")
            except OSError:
                # The client hung up; the caller closes the engine's response.
                exchange.client_disconnected = True
            return
        data = await response.read(limits.max_response_bytes)
        exchange.first_byte = time.perf_counter()
        if response.status >= 400:
            data = normalise_error_body(response.status, data)
            headers = [(n, v) for n, v in headers if n != b"content-type"]
            headers.append((b"content-type", _JSON))
        else:
            check_json_body(data)
        headers.append((b"content-length", str(len(data)).encode()))
        await responder.start(response.status, headers)
        await responder.body(data)


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
            await responder.body(sse_error_event(exc) + DONE, more=True)
            await responder.body(b"")
