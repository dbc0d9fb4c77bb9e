"""POST /v1/messages in translate mode: a chat-completions request to the engine.

The route runs the ``/v1/messages`` policy on the client's body (its ``json_schema``
rules on each tool's ``input_schema`` and on ``output_config.format.schema`` too),
translates it (translate.py), checks the answer where the policy's ``answers:`` say
(checked.py for a stream), and answers in the Messages API's shape (shape.py for a whole
answer, stream.py for a stream, each engine chunk's events sent as it
arrives); everything else is the proxy's (body limits, the client hanging up,
drain, the limiter, upstream errors), with Anthropic's error shape and
``request-id`` (call.py). What one request needs between the two steps is its
Plan, kept on its Call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import UpstreamProtocolError
from gateway.messages.call import MessagesCall
from gateway.messages.checked import CheckedMessageStream
from gateway.messages.shape import message_object, new_id
from gateway.messages.stream import MessageStream
from gateway.messages.translate import Wants, to_chat
from gateway.proxy.answercheck import enforce
from gateway.proxy.call import Call
from gateway.proxy.route import Prepared, Route
from gateway.routes import CHAT, MESSAGES, ROUTES
from gateway.schemas.answers import check_message
from gateway.schemas.expect import Expectation

_JSON = b"application/json"
_STREAM_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


@dataclass(slots=True)
class Plan:
    """One request between its translation and its answer."""

    message_id: str
    model: str
    wants: Wants
    expect: Expectation | None = None  # what the answer is checked against (answercheck.py)


class TranslatedMessages(Route):
    """POST /v1/messages, translated onto the engine's chat route."""

    row = ROUTES[MESSAGES]
    upstream_path = CHAT
    call_type = MessagesCall
    forward_query = False  # ?beta=true is the Messages API's, not the chat route's
    count = False  # count_tokens (count.py) asks the engine for one token

    def translate(self, call: Call, body: dict[str, Any]) -> dict[str, Any]:
        """The chat body for the policy-approved ``body``, its Plan on ``call``."""
        decision = self.decide(call, body)
        approved = decision.body
        chat, wants = to_chat(approved, count=self.count)
        model = approved.get("model")
        call.plan = Plan(
            new_id("msg"), model if isinstance(model, str) else "", wants, decision.expect
        )
        hinter = self.state.hinter if call.target is None else call.target.engine.hinter
        if hinter is not None and hinter.affinity is not None:
            # Keyed by the conversation the engine reads (system included), and by the
            # user (Claude Code's carries its session) where OpenAI's has prompt_cache_key.
            keyed = {"messages": chat["messages"], "prompt_cache_key": wants.user}
            record = call.record
            call.hint = hinter.hint(keyed, call.headers, client=record.client, profile=call.profile)
        return chat

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        chat = self.translate(call, body)
        sent = orjson.dumps(chat)
        # The limiter reserves by what the engine reads and may write.
        return Prepared(
            bodies=[sent], admitted=chat, size=len(sent), fields=ROUTES[CHAT].max_tokens
        )

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes]:
        if not isinstance(answer, dict):
            raise UpstreamProtocolError("The engine's answer is not a JSON object.")
        plan: Plan = call.plan
        message = message_object(
            answer, message_id=plan.message_id, model=plan.model, wants=plan.wants
        )
        if plan.expect is not None:
            enforce(call.record, check_message(plan.expect, message))  # a 502 if enforced
        return [(b"content-type", _JSON)], orjson.dumps(message)

    def stream_headers(self, headers: Headers) -> Headers:
        return list(_STREAM_HEADERS)

    def shaper(self, call: Call) -> MessageStream:
        plan: Plan = call.plan
        if plan.expect is not None:
            return CheckedMessageStream(
                plan.message_id, plan.model, plan.wants, plan.expect, call.record
            )
        return MessageStream(plan.message_id, plan.model, plan.wants)
