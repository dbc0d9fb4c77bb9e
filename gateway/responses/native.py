"""POST /v1/responses in native mode: the engine's own /v1/responses, under the policy.

The request is checked by the same ``/v1/responses`` policy route and forwarded
as the chat routes are; a whole answer (and any error) is normalised as theirs
are. A Responses stream has no ``data: [DONE]``: it ends with
``response.completed``, ``.incomplete`` or ``.failed``, so the relay here
watches for one of those, passes every whole event on as it arrives, and ends a
stream that breaks without one with an ``error`` event (the SDKs raise on it).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamError
from gateway.limits.meter import Usage
from gateway.observe.exchange import Exchange
from gateway.proxy.answers import check_head, whole_answer
from gateway.proxy.endpoint import ProxyEndpoint
from gateway.proxy.events import EventSplitter
from gateway.proxy.headers import DROP_DOWNSTREAM, filter_headers
from gateway.proxy.relay import stream_cut_short, stream_too_large
from gateway.proxy.responder import Responder
from gateway.state import GatewayState
from gateway.upstream.base import UpstreamResponse

ROUTE = "/v1/responses"
_ENDS = (b"response.completed", b"response.incomplete", b"response.failed")


def _ended(events: bytes) -> bool:
    return any(b'"type":"' + end + b'"' in events.replace(b'": "', b'":"') for end in _ENDS)


def failure_events(exc: GatewayError, sequence: int) -> bytes:
    """The ``error`` event that ends a broken native stream."""
    error = exc.openai_error()["error"]
    first: dict[str, Any] = {
        "type": "error",
        "sequence_number": sequence,
        "code": error["code"],
        "message": error["message"],
        "param": error["param"],
    }
    return b"event: error\ndata: " + orjson.dumps(first) + b"\n\n"


def responses_usage(data: bytes) -> Usage | None:
    """The metered usage of a whole ``response`` object (input/output/total tokens)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return _usage(value.get("usage") if isinstance(value, dict) else None)


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    if type(prompt) is not int or type(completion) is not int:
        return None
    total = usage.get("total_tokens")
    return Usage(prompt, completion, total if type(total) is int else prompt + completion)


def _final_usage(events: bytes) -> Usage | None:
    """The usage in the final event (its ``response``) of a native stream."""
    for line in reversed(events.split(b"\n")):
        if line.startswith(b"data:"):
            try:
                value = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return None
            response = value.get("response") if isinstance(value, dict) else None
            return _usage(response.get("usage")) if isinstance(response, dict) else None
    return None


class NativeResponses(ProxyEndpoint):
    """Forwards POST /v1/responses to the engine's own Responses route."""

    def __init__(self, state: GatewayState) -> None:
        super().__init__(state, route=ROUTE)

    async def _answer(
        self, response: UpstreamResponse, responder: Responder, exchange: Exchange, *, hide: bool
    ) -> None:
        headers = filter_headers(response.headers, DROP_DOWNSTREAM)
        limits = self.state.settings.limits
        if not check_head(response.status, headers, stream=exchange.stream):
            data = await response.read(limits.max_response_bytes)
            exchange.first_byte = time.perf_counter()
            if response.status < 400:
                exchange.usage = responses_usage(data)
            headers, data = whole_answer(response.status, headers, data)
            await responder.start(response.status, headers)
            await responder.body(data)
            return
        headers.append((b"cache-control", b"no-cache"))
        headers.append((b"x-accel-buffering", b"no"))
        await responder.start(response.status, headers)
        splitter = EventSplitter()
        ended = False
        size = 0
        events_sent = 0
        failure: GatewayError | None = None
        try:
            try:
                async for chunk in response.chunks():
                    if ended:
                        continue
                    if exchange.first_byte is None:
                        exchange.first_byte = time.perf_counter()
                    size += len(chunk)
                    if size > limits.max_stream_bytes:
                        failure = stream_too_large(limits.max_stream_bytes)
                        break
                    events, error = splitter.feed(chunk)
                    if events:
                        events_sent += events.count(b"\n\n")
                        await responder.body(events, more=True)
                        ended = _ended(events)
                        if ended:
                            exchange.usage = _final_usage(events)
                    if error is not None:
                        failure = error
                        break
            except UpstreamError as exc:
                if not ended:
                    failure = exc
            else:
                if failure is None and not ended:
                    failure = stream_cut_short()
            if failure is not None:
                exchange.failed(failure)
                await responder.body(failure_events(failure, events_sent), more=True)
            await responder.body(b"")
        except OSError:
            exchange.client_disconnected = True
