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
(proxy/answercheck.py). The engine's own ``error`` event, the error of its
``response.failed`` and that of a whole failed response reach the client only
in the shape safetext.py gives an engine's error (known secrets removed, words
that look like hosts, paths or keys redacted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError
from gateway.limits.meter import Usage, usage_of
from gateway.observe.exchange import Exchange
from gateway.proxy.answercheck import enforce, judge
from gateway.proxy.call import Call
from gateway.proxy.route import Prepared, Route
from gateway.proxy.safetext import known_secrets, safe_code, safe_message, safe_param
from gateway.routes import RESPONSES, ROUTES
from gateway.schemas.answers import check_response
from gateway.schemas.expect import Expectation

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_ERRORS = frozenset({"error", "response.failed"})
_NAME = re.compile(r"[a-z0-9_.]{1,64}")
_FAILED = "The engine failed in the middle of the stream."


class NativeStream:
    """A Responses stream from the engine, passed on event by event; with ``expect`` (the
    answer checks'), its end event held until the response it carries passes them."""

    __slots__ = ("ended", "_usage", "sequence", "response", "expect", "record", "held", "secrets")

    def __init__(
        self,
        expect: Expectation | None = None,
        record: Exchange | None = None,
        secrets: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.secrets = secrets  # what no error may show (asked only when one comes)
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
        if any(event.get("type") in _ERRORS for event in chunks):
            raw = self._safe(chunks)
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

    def _safe(self, chunks: list[Any]) -> bytes:
        """The events of ``chunks`` written again, their errors in the safe shape."""
        secrets = self.secrets()
        out = b""
        for event in chunks:
            kind = event.get("type")
            if kind == "error":
                event = event | {
                    "message": safe_message(event.get("message"), secrets) or _FAILED,
                    "code": safe_code(event.get("code")),
                    "param": safe_param(event.get("param"), secrets),
                }
            elif kind == "response.failed" and isinstance(event.get("response"), dict):
                event = event | {"response": failed_response(event["response"], secrets)}
            name = kind.encode() if isinstance(kind, str) and _NAME.fullmatch(kind) else b"message"
            out += b"event: " + name + b"\ndata: " + orjson.dumps(event) + b"\n\n"
        return out

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


def failed_response(response: dict[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """A failed ``response`` with its ``error`` in the safe shape (safetext.py)."""
    error = response.get("error")
    error = error if isinstance(error, dict) else {}
    safe = {
        "code": safe_code(error.get("code")) or "server_error",
        "message": safe_message(error.get("message"), secrets) or _FAILED,
    }
    return response | {"error": safe}


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
        if type(answer) is not dict or not isinstance(answer.get("error"), dict):
            return None
        # A failed response: its error in the safe shape, as a stream's response.failed.
        secrets = known_secrets(call.headers, self.state.engines.engines)
        return headers, orjson.dumps(failed_response(answer, secrets))

    def shaper(self, call: Call) -> NativeStream:
        engines = self.state.engines.engines
        return NativeStream(call.plan, call.record, lambda: known_secrets(call.headers, engines))
