"""The OpenAI completion routes: POST /v1/chat/completions and /v1/completions, and the
pass-through of GET /v1/models.

Their requests go to the engine as the policy leaves them (n of them for a
fan-out, fanout.py); their answers are the engine's own, byte for byte, but for
three things: an error normalised (answers.py); where the gateway asked a
stream for its usage and the client did not, that usage taken out again
(limits/meter.py's StreamMeter); and, where the engine sends no
``system_fingerprint`` (or null), the gateway's put in (fingerprint.py), in a
whole answer and in every chunk of a stream (a fan-out's merged one included).
Where the policy checks answers (answercheck.py), a whole answer is checked before
it goes, and a stream as it ends: its content relayed as it comes (it cannot be
held back without holding the whole answer), its end (the reads that bring a finish
reason or ``data: [DONE]``) held until the check passes.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError, render
from gateway.limits.meter import StreamMeter, Usage
from gateway.observe.exchange import Exchange
from gateway.proxy.answercheck import enforce, judge
from gateway.proxy.call import Call
from gateway.proxy.fanout import fanout_bodies, include_usage, with_usage
from gateway.proxy.fingerprint import stamp_answer, stamp_events
from gateway.proxy.route import Prepared, Route
from gateway.routes import CHAT, COMPLETIONS, ROUTES
from gateway.schemas.answers import check_chat
from gateway.schemas.expect import Expectation
from gateway.schemas.streamed import StreamedChat

DONE = b"data: [DONE]\n\n"


def error_end(exc: GatewayError) -> bytes:
    """The end of a broken chat stream: the error as an event, then ``data: [DONE]``
    (as OpenAI does mid-stream; openai-python raises on it)."""
    return render(exc, event=True) + DONE


class ChatStream:
    """A chat or completions stream: the engine's events passed on as they come, with
    ``fingerprint`` (the call's system_fingerprint; None: none) in chunks that lack one."""

    __slots__ = ("meter", "ended", "fingerprint")

    def __init__(self, *, hide: bool, fingerprint: bytes | None = None) -> None:
        self.meter = StreamMeter(hide=hide)
        self.ended = False
        self.fingerprint = fingerprint

    @property
    def usage(self) -> Usage | None:
        return self.meter.usage

    def start(self) -> bytes:
        return b""

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        self.ended = done
        # ``chunks`` are the parsed data of every chunk event in ``raw`` (EventReader),
        # so a usage none of them has is in none of the bytes: no scan for it.
        for chunk in chunks:
            if "usage" in chunk:
                out = self.meter.feed(raw)
                break
        else:
            out = raw
        if out and self.fingerprint is not None:
            # The chunks are those of ``out`` when the meter kept the events as they
            # were (else stamp_events scans ``out`` itself).
            out = stamp_events(out, self.fingerprint, chunks if out is raw else None)
        return out

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        return b"", None

    def fail(self, exc: GatewayError) -> bytes:
        return error_end(exc)


class CheckedChatStream(ChatStream):
    """A chat stream whose answer is checked as it ends: chunks relayed as they come, the
    end (the finish chunks and ``data: [DONE]``) held until the check passes."""

    __slots__ = ("expect", "record", "streamed", "held")

    def __init__(
        self,
        expect: Expectation,
        record: Exchange,
        *,
        hide: bool,
        fingerprint: bytes | None = None,
    ) -> None:
        super().__init__(hide=hide, fingerprint=fingerprint)
        self.expect = expect
        self.record = record
        self.streamed = StreamedChat()
        self.held: list[bytes] = []

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        first = None  # the first chunk that finishes a choice
        for index, chunk in enumerate(chunks):
            if self.streamed.feed(chunk) and first is None:
                first = index
        if self.held or (first is None and not done):
            out = super().events(raw, chunks, done=done)
            if self.held:
                self.held.append(out)
                return b""
            return out
        # The end came in this read: what comes before it goes now, the rest is held.
        cut = first if first is not None else len(chunks)
        events = raw.split(b"\n\n")
        if b"\r" in raw or len(events) != len(chunks) + done + 1:
            cut = 0  # framed otherwise (CRLF, comments): the whole read is held
        head = b"\n\n".join(events[:cut]) + b"\n\n" if cut else b""
        out = super().events(head, chunks[:cut], done=False) if cut else b""
        self.held.append(super().events(raw[len(head) :], chunks[cut:], done=done))
        return out

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        held, self.held = b"".join(self.held), []
        enforced = judge(self.record, check_chat(self.expect, self.streamed.answer()))
        if enforced is not None:
            return b"", enforced
        return held, None


class ChatRoute(Route):
    """POST /v1/chat/completions."""

    row = ROUTES[CHAT]

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        decision = self.decide(call, body)
        # What the answer is checked against (None: nothing, on most requests).
        call.plan = decision.expect
        record = call.record
        if not record.stream and decision.fanout == 1 and not decision.changed:
            # Most requests: the client's own bytes, as they came.
            return Prepared([raw], decision.body, len(raw), 1, self.max_tokens)
        asked = record.stream and include_usage(decision.body)
        # Metering asks a stream for its usage; the client never sees it unasked.
        call.hide = record.stream and not asked and self.state.settings.metering.stream_usage
        call.include_usage = asked
        forwarded = with_usage(decision.body) if call.hide else decision.body
        if decision.fanout > 1:
            bodies = fanout_bodies(forwarded, decision.fanout)
        elif call.hide or decision.changed:
            bodies = [orjson.dumps(forwarded)]
        else:
            bodies = [raw]
        return Prepared(
            bodies=bodies,
            admitted=decision.body,
            size=len(raw),
            fanout=decision.fanout,
            fields=self.max_tokens,
        )

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        if call.plan is not None:
            enforce(call.record, check_chat(call.plan, answer))
        if type(answer) is not dict or isinstance(answer.get("system_fingerprint"), str):
            return None  # the engine's own is kept
        fingerprint = self.state.fingerprint(self.name, call.target, call.policy)
        if fingerprint is None:
            return None
        return headers, stamp_answer(data, fingerprint, answer)

    def shaper(self, call: Call) -> ChatStream:
        # Looked up once per call: every chunk of the stream carries the same one.
        fingerprint = self.state.fingerprint(self.name, call.target, call.policy)
        if call.plan is not None:
            return CheckedChatStream(
                call.plan, call.record, hide=call.hide, fingerprint=fingerprint
            )
        return ChatStream(hide=call.hide, fingerprint=fingerprint)


class CompletionsRoute(ChatRoute):
    """POST /v1/completions: as chat, with a prompt instead of messages."""

    row = ROUTES[COMPLETIONS]


class ModelsRoute(Route):
    """GET /v1/models (and any route the policy has no say in): passed through, but
    for the models a key limited to some may not use."""

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        # A key limited to some models sees only those (as a fleet's list shows it).
        gate = self.state.models
        if gate is None or type(answer) is not dict or type(answer.get("data")) is not list:
            return None
        allowed = gate.allowed(call.record.client, call.profile)
        if allowed is None:
            return None
        kept = [
            m
            for m in answer["data"]
            if type(m) is dict and type(m.get("id")) is str and m["id"] in allowed
        ]
        return headers, orjson.dumps({**answer, "data": kept})
