"""POST /v1/responses in native mode: the engine's own /v1/responses, under the policy.

The request is checked by the same ``/v1/responses`` policy route and forwarded
as the chat routes' are; a whole answer (and any error) is normalised as theirs
are. A Responses stream has no ``data: [DONE]``: it ends with
``response.completed``, ``.incomplete`` or ``.failed``, so the shaper here
watches for one of those, passes every whole event on as it arrives, and ends a
stream that breaks without one as OpenAI ends a failed one: an ``error`` event
(the SDKs raise on it) and, once the engine has said which response this is,
``response.failed``. Where the policy checks answers, a whole answer is checked
before it goes and a stream's end event held until the response it carries passes
(proxy/answercheck.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError
from gateway.limits.meter import Usage, usage_of
from gateway.observe.exchange import Exchange
from gateway.proxy.answercheck import enforce, judge
from gateway.proxy.call import Call
from gateway.proxy.route import Prepared, Route
from gateway.routes import RESPONSES, ROUTES
from gateway.schemas.answers import check_response
from gateway.schemas.expect import Expectation

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class NativeStream:
    """A Responses stream from the engine, passed on event by event; with ``expect`` (the
    answer checks'), its end event held until the response it carries passes them."""

    __slots__ = ("ended", "_usage", "sequence", "response", "expect", "record", "held")

    def __init__(self, expect: Expectation | None = None, record: Exchange | None = None) -> None:
        self.ended = False
        self._usage: Usage | None = None
        self.sequence = 0  # the events the client got (the next sequence_number)
        self.response: dict[str, Any] | None = None  # the engine's, from its first event
        self.expect = expect
        self.record = record
        self.held = b""  # the end, until the answer checks pass it

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def start(self) -> bytes:
        return b""

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        end = None
        for index, event in enumerate(chunks):
            response = event.get("response")
            if isinstance(response, dict):
                self.response = response
                if event.get("type") in _ENDS:
                    self.ended = True
                    self._usage = usage_of(response.get("usage"))
                    if end is None:
                        end = index
        if self.expect is not None and (end is not None or self.held):
            raw = self._hold(raw, chunks, 0 if self.held else end or 0)
        self.sequence += raw.count(b"\n\n")
        return raw

    def _hold(self, raw: bytes, chunks: list[Any], cut: int) -> bytes:
        """What goes now of ``raw``: the events before the ``cut``-th; the rest is held."""
        events = raw.split(b"\n\n")
        if cut == 0 or b"\r" in raw or len(events) != len(chunks) + 1:
            self.held += raw
            return b""
        head = b"\n\n".join(events[:cut]) + b"\n\n"
        self.held += raw[len(head) :]
        return head

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        held, self.held = self.held, b""
        if self.expect is not None and self.record is not None and held:
            enforced = judge(self.record, check_response(self.expect, self.response))
            if enforced is not None:
                return b"", enforced
        self.sequence += held.count(b"\n\n")
        return held, None

    def fail(self, exc: GatewayError) -> bytes:
        error = exc.openai_error()["error"]
        out = self._event(
            "error", {"code": error["code"], "message": error["message"], "param": error["param"]}
        )
        if self.response is not None:
            failed = self.response | {
                "status": "failed",
                "error": {"code": "server_error", "message": error["message"]},
            }
            out += self._event("response.failed", {"response": failed})
        return out

    def _event(self, kind: str, data: dict[str, Any]) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class NativeResponses(Route):
    """Forwards POST /v1/responses to the engine's own Responses route."""

    row = ROUTES[RESPONSES]

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        decision = self.decide(call, body)
        call.plan = decision.expect  # what the answer is checked against (None: nothing)
        sent = raw if not decision.changed else orjson.dumps(decision.body)
        return Prepared(
            bodies=[sent], admitted=decision.body, size=len(raw), fields=self.max_tokens
        )

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        if call.plan is not None:
            enforce(call.record, check_response(call.plan, answer))
        return None

    def shaper(self, call: Call) -> NativeStream:
        return NativeStream(call.plan, call.record)
