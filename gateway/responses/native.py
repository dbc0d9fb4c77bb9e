"""POST /v1/responses in native mode: the engine's own /v1/responses, under the policy.

The request is checked by the same ``/v1/responses`` policy route and forwarded
as the chat routes' are; a whole answer (and any error) is normalised as theirs
are. A Responses stream has no ``data: [DONE]``: it ends with
``response.completed``, ``.incomplete`` or ``.failed``, so the shaper here
watches for one of those, passes every whole event on as it arrives, and ends a
stream that breaks without one as OpenAI ends a failed one: an ``error`` event
(the SDKs raise on it) and, once the engine has said which response this is,
``response.failed``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.limits.meter import Usage, usage_of
from gateway.proxy.call import Call
from gateway.proxy.route import Route
from gateway.routes import RESPONSES, ROUTES

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class NativeStream:
    """A Responses stream from the engine, passed on event by event."""

    __slots__ = ("ended", "_usage", "sequence", "response")

    def __init__(self) -> None:
        self.ended = False
        self._usage: Usage | None = None
        self.sequence = 0  # the events the client got (the next sequence_number)
        self.response: dict[str, Any] | None = None  # the engine's, from its first event

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def start(self) -> bytes:
        return b""

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        self.sequence += raw.count(b"\n\n")
        for event in chunks:
            response = event.get("response")
            if isinstance(response, dict):
                self.response = response
                if event.get("type") in _ENDS:
                    self.ended = True
                    self._usage = usage_of(response.get("usage"))
        return raw

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        return b"", None

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

    def shaper(self, call: Call) -> NativeStream:
        return NativeStream()
