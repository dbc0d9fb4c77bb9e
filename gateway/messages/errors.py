"""Anthropic's error shape, for every answer the gateway gives on the Messages API's routes.

``{"type": "error", "error": {"type": T, "message": M}, "request_id": ID}``, with
Anthropic's types and statuses (docs.claude.com/en/api/errors): 400
invalid_request_error (also every other 4xx Anthropic does not list), 401
authentication_error, 402 billing_error, 403 permission_error, 404
not_found_error, 413 request_too_large, 429 rate_limit_error, 500 api_error,
504 timeout_error, 529 overloaded_error. What the gateway answers 502 (an engine
that failed) is Anthropic's 500 api_error, and its 503s (the queue shed the
request, no replica is up, the gateway is draining, the limiter's store is
down) are 529 overloaded_error: the SDKs and Claude Code retry both, with
backoff. A refusal names the field as Anthropic's own errors do, its path first
(``messages.2.content.1.type: ...``, where the gateway's ``param`` says
``messages[2].content[1].type``). Mid-stream the error is an ``event: error``,
on which the SDKs raise.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.errors import ErrorShape, GatewayError, NotFound

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_INDEX = re.compile(r"\[(\d+)\]")
# Anthropic's Message Batches API, which the gateway does not serve (``unserved``).
MESSAGE_BATCHES = "/v1/messages/batches"


def anthropic_path(param: str) -> str:
    """A request path as Anthropic writes it: ``messages.2.content.1.type``."""
    return _INDEX.sub(r".\1", param)


def anthropic_status(status: int) -> tuple[int, str]:
    """The status and error type the client gets for an error of ``status``."""
    if status in _TYPES:
        return status, _TYPES[status]
    if status == 503:
        return 529, "overloaded_error"
    if 400 <= status < 500:
        return status, "invalid_request_error"
    return 500, "api_error"


def _message(exc: GatewayError) -> str:
    # Its OpenAI object's message, not ``exc.message``: an engine's own error event
    # (proxy/events.py) keeps there the text scrubbed of the request's secrets.
    message = str(exc.openai_error()["error"].get("message") or exc.message)
    param = exc.param
    if not param:
        return message
    path = anthropic_path(param)
    return f"{path}: {message.replace(param, path)}"


def unserved(method: str, path: str) -> NotFound:
    """The 404 of a path under ``/v1/messages`` that the gateway does not serve; Anthropic's
    Message Batches API named, with where its requests can go instead."""
    if path == MESSAGE_BATCHES or path.startswith(MESSAGE_BATCHES + "/"):
        return NotFound(
            f"ft-gateway does not serve Anthropic's Message Batches API ({method} {path}): "
            "send each request to POST /v1/messages, or run the batch through OpenAI's "
            "Batch API (/v1/files, /v1/batches), which the gateway serves under the same "
            "policy (docs/messages.md)."
        )
    return NotFound(f"Invalid URL ({method} {path}).")


def error_object(status: int, message: str) -> dict[str, Any]:
    """Anthropic's inner error object for an error of ``status``."""
    return {"type": anthropic_status(status)[1], "message": message}


def _body(error: dict[str, Any], request_id: str | None) -> bytes:
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return orjson.dumps(body)


class AnthropicErrors(ErrorShape):
    """The Messages API's errors (module docstring)."""

    def status(self, exc: GatewayError) -> int:
        return anthropic_status(exc.status)[0]

    def body(self, exc: GatewayError, request_id: str | None = None) -> bytes:
        return _body(error_object(exc.status, _message(exc)), request_id)

    def event(self, exc: GatewayError) -> bytes:
        return (
            b"event: error\ndata: " + _body(error_object(exc.status, _message(exc)), None) + b"\n\n"
        )

    def relayed(
        self, status: int, error: dict[str, Any], request_id: str | None = None
    ) -> tuple[int, bytes]:
        message = str(error.get("message") or f"The engine failed (HTTP {status}).")
        return anthropic_status(status)[0], _body(error_object(status, message), request_id)


ANTHROPIC_ERRORS = AnthropicErrors()
