"""POST /v1/responses in translate mode: a chat-completions request to the engine.

The proxy endpoint's machinery (body limits, the client hanging up, drain,
upstream errors) is reused whole; this endpoint prepares a different body
(policy on the Responses request, then translate.py) and answers differently
(shape.py for a whole answer, stream.py for a stream, each engine chunk's
events sent as it arrives). What one request needs between the two steps
lives in a context variable: the endpoint object is shared by every request.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import (
    GatewayError,
    InvalidRequest,
    ShuttingDown,
    StoreUnavailable,
    UpstreamError,
    UpstreamProtocolError,
)
from gateway.limits.meter import usage_of as metered
from gateway.observe.exchange import Exchange
from gateway.policy.engine import apply_policy
from gateway.proxy.answers import check_head, whole_answer
from gateway.proxy.endpoint import Prepared, ProxyEndpoint
from gateway.proxy.headers import DROP_DOWNSTREAM, filter_headers
from gateway.proxy.relay import stream_cut_short, stream_too_large
from gateway.proxy.responder import Responder
from gateway.responses.chunks import ChunkReader
from gateway.responses.roles import instructions_role
from gateway.responses.shape import output_of, response_object, usage_of
from gateway.responses.store import ResponseStore, StoredResponse, owner_of
from gateway.responses.stream import StreamTranslator
from gateway.responses.translate import GATEWAY_ONLY, input_items, new_id, to_chat
from gateway.routing.hint import HINT
from gateway.state import GatewayState
from gateway.upstream.base import UpstreamResponse

ROUTE = "/v1/responses"
_JSON = b"application/json"


@dataclass
class Plan:
    """One request between its translation and its answer."""

    response_id: str
    request: dict[str, Any]
    owner: str
    store: bool
    items: list[dict[str, Any]]
    history: list[dict[str, Any]] = field(default_factory=list)
    created_at: int = field(default_factory=lambda: int(time.time()))
    translator: StreamTranslator | None = None  # once a stream has started


_PLAN: ContextVar[Plan] = ContextVar("responses_plan")


def _authorization(headers: Headers) -> bytes | None:
    for name, value in headers:
        if name == b"authorization":
            return value
    return None


async def read_history(
    store: ResponseStore | None, previous: Any, owner: str
) -> list[dict[str, Any]]:
    """The conversation ``previous_response_id`` continues (empty without one)."""
    if previous is None:
        return []
    if store is None:
        raise InvalidRequest(
            "'previous_response_id' needs a response store, and this gateway has none "
            "configured (store.backend is 'none'): send the whole conversation in 'input'.",
            param="previous_response_id",
            code="unsupported_parameter",
        )
    record = await store.get(str(previous), owner)
    if record is None:
        raise InvalidRequest(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    return record.conversation()


class ResponsesEndpoint(ProxyEndpoint):
    """ASGI endpoint for POST /v1/responses, translated onto the engine's chat route."""

    upstream_path = "/v1/chat/completions"

    def __init__(self, state: GatewayState, *, store: ResponseStore | None) -> None:
        super().__init__(state, route=ROUTE)
        self.store = store

    async def _prepare(
        self,
        raw: bytes,
        body: dict[str, Any],
        *,
        headers: Headers,
        profile: str | None,
        exchange: Exchange,
    ) -> Prepared:
        decision = apply_policy(self.state.policy, ROUTE, body, profile=profile)
        exchange.outcomes = decision.outcomes
        if decision.error is not None:
            raise decision.error
        approved = decision.body
        exchange.stream = approved.get("stream") is True
        store = self.store is not None and body.get("store") is not False
        # Who may read it: worked out only where a store is (a digest per request).
        owner = owner_of(exchange.client, _authorization(headers)) if self.store else ""
        previous = approved.get("previous_response_id")
        history = [] if previous is None else await read_history(self.store, previous, owner)
        items = input_items(approved.get("input"), ids=store)
        role = instructions_role(self.state.policy, profile)
        chat = to_chat(approved, [*history, *items], first=len(history), instructions_role=role)
        if not chat["messages"]:
            raise InvalidRequest(
                "Missing required parameter: 'input'.",
                param="input",
                code="missing_required_parameter",
            )
        hinter = self.state.hinter
        if hinter is not None and hinter.affinity is not None:
            # Keyed again by the conversation the engine reads, stored history included:
            # a previous_response_id chain's turns share a content key as chat turns do.
            keyed = {"messages": chat["messages"], "prompt_cache_key": body.get("prompt_cache_key")}
            HINT.set(hinter.hint(keyed, headers, client=exchange.client, profile=profile))
        # Echoed as the client sent them, even where the policy kept them from the engine.
        echo = {k: body[k] for k in GATEWAY_ONLY if k in body} | approved
        _PLAN.set(
            Plan(
                response_id=new_id("resp"),
                request=echo,
                owner=owner,
                store=store,
                items=items,
                history=history,
            )
        )
        sent = orjson.dumps(chat)
        # The limiter reserves by what the engine reads: the whole conversation.
        return Prepared([sent], chat, len(sent))

    async def _keep(self, plan: Plan, response: dict[str, Any]) -> None:
        if plan.store and self.store is not None:
            await self.store.put(StoredResponse(plan.owner, response, plan.items, plan.history))

    async def _answer(
        self, response: UpstreamResponse, responder: Responder, exchange: Exchange, *, hide: bool
    ) -> None:
        # hide: never set here; a translated stream always asks for usage (include_usage)
        # and the client sees it as the Responses usage.
        plan = _PLAN.get()
        headers = filter_headers(response.headers, DROP_DOWNSTREAM)
        limits = self.state.settings.limits
        if check_head(response.status, headers, stream=exchange.stream):
            await self._stream(plan, response, responder, exchange)
            return
        data = await response.read(limits.max_response_bytes)
        exchange.first_byte = time.perf_counter()
        if response.status >= 400:
            headers, data = whole_answer(response.status, headers, data)
            await responder.start(response.status, headers)
            await responder.body(data)
            return
        if exchange.trace is not None:
            exchange.trace.answer(data)
        try:
            chat = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise UpstreamProtocolError("The engine's answer is not valid JSON.") from None
        if not isinstance(chat, dict):
            raise UpstreamProtocolError("The engine's answer is not a JSON object.")
        exchange.usage = metered(chat.get("usage"))
        output, status, incomplete = output_of(chat, new_id)
        answer = response_object(
            plan.response_id,
            plan.request,
            created_at=plan.created_at,
            status=status,
            output=output,
            usage=usage_of(chat.get("usage")),
            incomplete=incomplete,
            stored=plan.store,
        )
        fingerprint = chat.get("system_fingerprint") or self.state.fingerprint(self.route)
        if isinstance(fingerprint, bytes):
            fingerprint = fingerprint.decode()
        if fingerprint is not None:
            answer["system_fingerprint"] = fingerprint
        await self._keep(plan, answer)
        payload = orjson.dumps(answer)
        await responder.start(
            200,
            [(b"content-type", _JSON), (b"content-length", str(len(payload)).encode())],
        )
        await responder.body(payload)

    async def _end_for_shutdown(self, responder: Responder) -> None:
        # A stream the drain time-out cut ends as a Responses stream does: an error
        # event and response.failed (not the chat routes' data: {"error"} + [DONE]).
        plan = _PLAN.get(None)
        translator = plan.translator if plan is not None else None
        if translator is None or not responder.started or responder.complete:
            await super()._end_for_shutdown(responder)
            return
        exc = ShuttingDown(
            "The gateway is shutting down; the request was ended before it was complete."
        )
        with contextlib.suppress(OSError):
            await responder.body(translator.fail(exc), more=True)
            await responder.body(b"")

    async def _stream(
        self, plan: Plan, response: UpstreamResponse, responder: Responder, exchange: Exchange
    ) -> None:
        translator = StreamTranslator(
            plan.response_id,
            plan.request,
            created_at=plan.created_at,
            new_id=new_id,
            stored=plan.store,
        )
        fingerprint = self.state.fingerprint(self.route)
        translator.fingerprint = fingerprint.decode() if fingerprint is not None else None
        plan.translator = translator
        await responder.start(
            200,
            [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ],
        )
        try:
            await self._relay(plan, translator, response, responder, exchange)
        finally:
            exchange.usage = metered(translator.chat_usage)

    async def _relay(
        self,
        plan: Plan,
        translator: StreamTranslator,
        response: UpstreamResponse,
        responder: Responder,
        exchange: Exchange,
    ) -> None:
        limit = self.state.settings.limits.max_stream_bytes
        trace = exchange.trace
        try:
            await responder.body(translator.start(), more=True)
            reader = ChunkReader()
            failure: GatewayError | None = None
            size = 0
            try:
                async for chunk in response.chunks():
                    if reader.done:
                        continue  # read to the end so the connection can be reused
                    if exchange.first_byte is None:
                        exchange.first_byte = time.perf_counter()
                    size += len(chunk)
                    if size > limit:
                        failure = stream_too_large(limit)
                        break
                    chunks, error = reader.feed(chunk)
                    if chunks:
                        if trace is not None:  # it reads whole chat events (usage, text)
                            trace.events(
                                b"".join([b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks])
                            )
                        out = b"".join([translator.chunk(c) for c in chunks])
                        if out:
                            await responder.body(out, more=True)
                    if error is not None:
                        failure = error
                        break
            except UpstreamError as exc:
                failure = exc
            else:
                if failure is None and not reader.done:
                    failure = stream_cut_short()
            if failure is None:
                out = translator.finish()
                final = translator.final or {}
                try:
                    await self._keep(plan, final)
                except StoreUnavailable as exc:
                    failure = exc
                    await responder.body(out, more=True)  # the items are done; the response failed
                else:
                    await responder.body(out + translator.final_event(final), more=True)
            if failure is not None:
                exchange.failed(failure)
                await responder.body(translator.fail(failure), more=True)
            await responder.body(b"")
        except OSError:
            # The client hung up; the caller closes the engine's response.
            exchange.client_disconnected = True
