"""POST /v1/responses in native mode: the engine's own /v1/responses, under the policy.

The request is checked by the same ``/v1/responses`` policy route and forwarded
as the chat routes' are; a whole answer (and any error) is normalised as theirs
are. A Responses stream has no ``data: [DONE]``: it ends with
``response.completed``, ``.incomplete`` or ``.failed``, so the shaper here
watches for one of those, passes every whole event on as it arrives, and ends a
stream that breaks without one as OpenAI ends a failed one: an ``error`` event
(the SDKs raise on it) and, once the engine has said which response this is,
``response.failed``. The engine's own ``error`` event, the error of its
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
from gateway.proxy.call import Call
from gateway.proxy.route import Route
from gateway.proxy.safetext import known_secrets, safe_code, safe_message, safe_param
from gateway.routes import RESPONSES, ROUTES

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_ERRORS = frozenset({"error", "response.failed"})
_NAME = re.compile(r"[a-z0-9_.]{1,64}")
_FAILED = "The engine failed in the middle of the stream."


class NativeStream:
    """A Responses stream from the engine, passed on event by event."""

    __slots__ = ("ended", "_usage", "sequence", "response", "secrets")

    def __init__(self, secrets: Callable[[], Sequence[str]] = tuple) -> None:
        self.secrets = secrets  # what no error may show (asked only when one comes)
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
        failing = False
        for event in chunks:
            failing = failing or event.get("type") in _ERRORS
            response = event.get("response")
            if isinstance(response, dict):
                self.response = response
                if event.get("type") in _ENDS:
                    self.ended = True
                    self._usage = usage_of(response.get("usage"))
        return raw if not failing else self._safe(chunks)

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

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        """The engine's whole answer as it is, but a failed one's ``error`` made safe."""
        if type(answer) is not dict or not isinstance(answer.get("error"), dict):
            return None
        secrets = known_secrets(call.headers, self.state.engines.engines)
        return headers, orjson.dumps(failed_response(answer, secrets))

    def shaper(self, call: Call) -> NativeStream:
        engines = self.state.engines.engines
        return NativeStream(lambda: known_secrets(call.headers, engines))
