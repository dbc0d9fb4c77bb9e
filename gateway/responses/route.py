"""POST /v1/responses in translate mode: a chat-completions request to the engine.

The route prepares a different body (the policy on the Responses request, then
translate.py) and answers differently (shape.py for a whole answer, stream.py
for a stream, each engine chunk's events sent as it arrives); everything else
is the proxy's (body limits, the client hanging up, drain, upstream errors).
What one request needs between the two steps is its Plan, kept on its Call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError, InvalidRequest, StoreUnavailable, UpstreamProtocolError
from gateway.limits.meter import Usage, usage_of
from gateway.observe.exchange import Exchange
from gateway.proxy.answercheck import enforce, judge
from gateway.proxy.call import Call
from gateway.proxy.route import Prepared, Route
from gateway.responses.bounds import StoreShare, check_metadata
from gateway.responses.onecall import OneCallTranslator, first_call_only, wants_one_call
from gateway.responses.references import item_ids, resolve_references
from gateway.responses.roles import instructions_role
from gateway.responses.shape import output_of, response_object
from gateway.responses.shape import usage_of as responses_usage
from gateway.responses.store import ResponseStore, StoredResponse, owner_of
from gateway.responses.stream import StreamTranslator
from gateway.responses.translate import GATEWAY_ONLY, input_items, new_id, to_chat
from gateway.routes import CHAT, RESPONSES, ROUTES
from gateway.schemas.answers import check_response
from gateway.schemas.expect import Expectation
from gateway.state import GatewayState

_JSON = b"application/json"
_STREAM_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


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
    ids: Callable[[str], str] = new_id  # its items' ids (references.item_ids)
    expect: Expectation | None = None  # what the answer is checked against (answercheck.py)


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


class TranslatedStream:
    """A chat stream as Responses events (StreamTranslator), the response stored at its end."""

    __slots__ = ("keep", "plan", "translator", "ended", "record")

    def __init__(
        self,
        plan: Plan,
        *,
        keep: Callable[[Plan, dict[str, Any]], Awaitable[None]],
        fingerprint: str | None = None,
        record: Exchange | None = None,
    ) -> None:
        self.keep = keep  # stores the finished response (the route's ``keep``)
        self.plan = plan
        self.record = record  # where the answer checks' findings go
        one_call = wants_one_call(plan.request)
        self.translator = (OneCallTranslator if one_call else StreamTranslator)(
            plan.response_id,
            plan.request,
            created_at=plan.created_at,
            new_id=plan.ids,
            stored=plan.store,
        )
        # The gateway's system_fingerprint, until the engine's first chunk brings its own.
        self.translator.fingerprint = fingerprint
        self.ended = False

    @property
    def usage(self) -> Usage | None:
        return usage_of(self.translator.chat_usage)

    def start(self) -> bytes:
        return self.translator.start()

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        self.ended = done
        translate = self.translator.chunk
        if len(chunks) == 1:
            return translate(chunks[0])
        return b"".join([translate(c) for c in chunks])

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        out = self.translator.finish()
        final = self.translator.final or {}
        expect = self.plan.expect
        if expect is not None and self.record is not None:
            # Checked before response.completed (held back so far) goes, and before it is
            # stored: a broken answer ends the stream with the error instead.
            enforced = judge(self.record, check_response(expect, final))
            if enforced is not None:
                return out, enforced
        try:
            await self.keep(self.plan, final)
        except StoreUnavailable as exc:
            return out, exc  # the items are done; the response failed
        return out + self.translator.final_event(final), None

    def fail(self, exc: GatewayError) -> bytes:
        return self.translator.fail(exc)


class TranslatedResponses(Route):
    """POST /v1/responses, translated onto the engine's chat route."""

    row = ROUTES[RESPONSES]
    upstream_path = CHAT

    def __init__(self, state: GatewayState, *, store: ResponseStore | None = None) -> None:
        super().__init__(state)
        self.store = store
        self.share = StoreShare(state.settings.store.max_bytes_per_key)

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        decision = self.decide(call, body)
        approved = decision.body
        metadata = body.get("metadata")
        if metadata is not None:
            check_metadata(metadata)  # echoed, and kept with a stored response
        record = call.record
        store = self.store is not None and body.get("store") is not False
        # Who may read it: worked out only where a store is (a digest per request).
        headers = call.headers
        owner = (
            (call.owner or owner_of(record.client, _authorization(headers))) if self.store else ""
        )
        previous = approved.get("previous_response_id")
        history = [] if previous is None else await read_history(self.store, previous, owner)
        response_id = new_id("resp")
        ids = item_ids(response_id)
        items = input_items(approved.get("input"), ids=store, make_id=ids)
        items = await resolve_references(self.store, items, owner)
        role = instructions_role(self.policy(call), call.profile)
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
            call.hint = hinter.hint(keyed, headers, client=record.client, profile=call.profile)
        # Echoed as the client sent them, even where the policy kept them from the engine.
        echo = {k: body[k] for k in GATEWAY_ONLY if k in body} | approved
        call.plan = Plan(
            response_id=response_id,
            request=echo,
            owner=owner,
            store=store,
            items=items,
            history=history,
            ids=ids,
            expect=decision.expect,
        )
        sent = orjson.dumps(chat)
        share = self.share
        if store and share.limit is not None and share.held.get(owner, 0) + len(sent) > share.limit:
            # Past its share by this process's figure (the record holds about what the
            # engine reads): the store says whether it still is.
            await share.admit(self.store, owner, len(sent))
        # The limiter reserves by what the engine reads: the whole conversation.
        return Prepared(
            bodies=[sent], admitted=chat, size=len(sent), fields=ROUTES[CHAT].max_tokens
        )

    async def keep(self, plan: Plan, response: dict[str, Any]) -> None:
        """Store the finished ``response`` where the request asked to."""
        if plan.store and self.store is not None:
            record = StoredResponse(plan.owner, response, plan.items, plan.history)
            self.share.noted(plan.owner, await self.store.put(record))

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes]:
        if not isinstance(answer, dict):
            raise UpstreamProtocolError("The engine's answer is not a JSON object.")
        plan: Plan = call.plan
        if wants_one_call(plan.request):
            answer = first_call_only(answer)
        output, status, incomplete = output_of(answer, plan.ids)
        response = response_object(
            plan.response_id,
            plan.request,
            created_at=plan.created_at,
            status=status,
            output=output,
            usage=responses_usage(answer.get("usage")),
            incomplete=incomplete,
            stored=plan.store,
        )
        own = answer.get("system_fingerprint")
        fingerprint = own if isinstance(own, str) else self._fingerprint(call)
        if fingerprint is not None:
            response["system_fingerprint"] = fingerprint
        if plan.expect is not None:
            enforce(call.record, check_response(plan.expect, response))  # neither sent nor stored
        await self.keep(plan, response)
        payload = orjson.dumps(response)
        return [(b"content-type", _JSON)], payload

    def stream_headers(self, headers: Headers) -> Headers:
        return list(_STREAM_HEADERS)

    def shaper(self, call: Call) -> TranslatedStream:
        return TranslatedStream(
            call.plan, keep=self.keep, fingerprint=self._fingerprint(call), record=call.record
        )

    def _fingerprint(self, call: Call) -> str | None:
        """The gateway's system_fingerprint for this call's answer (engines send none)."""
        fingerprint = self.state.fingerprint(self.name, call.target, call.policy)
        return fingerprint.decode() if fingerprint is not None else None
