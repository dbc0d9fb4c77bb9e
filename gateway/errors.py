"""The gateway's one error hierarchy.

    GatewayError                      500  server_error
    ├── InvalidRequest                400  invalid_request_error  (param, code)
    │   ├── BodyTooLarge              413
    │   ├── UnsupportedMediaType      415
    │   └── RequestTimeout            408
    ├── AuthenticationFailed          401  invalid_request_error / invalid_api_key
    ├── NotFound                      404  invalid_request_error / unknown_url
    │   └── ModelNotFound             404  model_not_found  (param model)
    ├── MethodNotAllowed              405  invalid_request_error / method_not_allowed
    ├── RateLimited                   429  requests|tokens / rate_limit_exceeded  (Retry-After)
    ├── QuotaExceeded                 429  insufficient_quota  (x-should-retry: false)
    ├── LimiterUnavailable            503  server_error / rate_limiter_unavailable
    ├── ShuttingDown                  503  server_error / shutting_down  (Retry-After)
    ├── StoreUnavailable              503  server_error / store_unavailable
    ├── Overloaded                    503  server_error / engine_overloaded  (Retry-After)
    └── UpstreamError                 502  upstream_error
        ├── UpstreamUnreachable       502  upstream_unreachable
        ├── UpstreamTimeout           504  upstream_timeout
        ├── UpstreamUnavailable       503  upstream_unavailable  (Retry-After)
        ├── UpstreamProtocolError     502  upstream_protocol_error
        └── AnswerViolation           502  answer_violates_schema | _tool_choice | ... (param)

Every class knows its HTTP status and OpenAI ``type``/``code``; ``render``
turns any of them into bytes in an API's error shape (``ErrorShape``: OpenAI's
``{"error": {message, type, param, code}}`` unless a route gives its own, as
Anthropic's Messages API does in gateway/messages/errors.py), as a response
body or as the SSE event that ends a stream. It is the one place an error
becomes bytes: the app's handlers, the proxy, the relay and ``ft-gateway
explain`` all call it. This module imports no web framework: the policy engine
and the CLI raise and inspect these too.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson


class GatewayError(Exception):
    """Base of every error the gateway answers with."""

    status: ClassVar[int] = 500
    type: ClassVar[str] = "server_error"
    default_code: ClassVar[str | None] = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code
        self.headers = headers or {}

    def openai_error(self) -> dict[str, Any]:
        """OpenAI's error object: all four keys present, ``code`` a string or null."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class ErrorShape:
    """How one API writes an error: its status, its body, the event that ends a stream
    once it has started, and an engine's error relayed. OpenAI's here; a route with
    another API's clients gives its own (``Route.call_type``'s responder carries it)."""

    def status(self, exc: GatewayError) -> int:
        """The HTTP status the client gets for ``exc``."""
        return exc.status

    def body(self, exc: GatewayError, request_id: str | None = None) -> bytes:
        """``exc`` as a response body (``request_id``: the request's, where the API
        puts it in the body)."""
        return orjson.dumps(exc.openai_error())

    def event(self, exc: GatewayError) -> bytes:
        """``exc`` as the SSE event that ends a started stream (OpenAI sends
        ``data: {"error": ...}`` mid-stream, and its SDKs raise on it)."""
        return b"data: " + orjson.dumps(exc.openai_error()) + b"\n\n"

    def relayed(
        self, status: int, error: dict[str, Any], request_id: str | None = None
    ) -> tuple[int, bytes]:
        """An engine's error answer (``error``: OpenAI's inner object, normalised by
        proxy/engineerrors.py) as the status and body the client gets."""
        return status, orjson.dumps({"error": error})


OPENAI_ERRORS = ErrorShape()


def render(
    exc: GatewayError,
    *,
    event: bool = False,
    shape: ErrorShape = OPENAI_ERRORS,
    request_id: str | None = None,
) -> bytes:
    """``exc`` in ``shape`` (OpenAI's by default): a response body, or with ``event``
    the SSE event carrying it (after a stream has started an error can only be an
    event)."""
    return shape.event(exc) if event else shape.body(exc, request_id)


class InvalidRequest(GatewayError):
    """The client's request is malformed or asks for something this deployment refuses."""

    status = 400
    type = "invalid_request_error"
    default_code = "invalid_value"


class BodyTooLarge(InvalidRequest):
    """The request body is larger than the configured limit."""

    status = 413
    default_code = "request_too_large"


class UnsupportedMediaType(InvalidRequest):
    """The request body is not declared as JSON."""

    status = 415
    default_code = "unsupported_media_type"


class RequestTimeout(InvalidRequest):
    """The client did not send its whole request body in time."""

    status = 408
    default_code = "request_timeout"


class AuthenticationFailed(GatewayError):
    """A missing or wrong API key."""

    status = 401
    type = "invalid_request_error"
    default_code = "invalid_api_key"


class NotFound(GatewayError):
    """No route for this path."""

    status = 404
    type = "invalid_request_error"
    default_code = "unknown_url"


class ModelNotFound(NotFound):
    """No deployment serves the request's model, or the caller's key may not use it
    (OpenAI does not tell a key which models exist: one answer for both)."""

    default_code = "model_not_found"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"The model `{model}` does not exist or you do not have access to it.", param="model"
        )


class MethodNotAllowed(GatewayError):
    """The path exists but not with this method."""

    status = 405
    type = "invalid_request_error"
    default_code = "method_not_allowed"


class RateLimited(GatewayError):
    """A key is over one of its limits; OpenAI's ``type`` says which kind (requests or
    tokens), its ``code`` is ``rate_limit_exceeded``."""

    status = 429
    type = "requests"
    default_code = "rate_limit_exceeded"

    def __init__(self, message: str, *, kind: str, limit: str, headers: dict[str, str]) -> None:
        super().__init__(message, headers=headers)
        self.kind = kind
        self.limit = limit  # the name of the limit, e.g. requests_per_minute

    def openai_error(self) -> dict[str, Any]:
        error = super().openai_error()
        error["error"]["type"] = self.kind
        return error


class LimiterUnavailable(GatewayError):
    """The shared rate-limit store cannot be reached and the gateway fails closed."""

    status = 503
    default_code = "rate_limiter_unavailable"


class ShuttingDown(GatewayError):
    """The gateway is draining before it stops; another replica can take the request."""

    status = 503
    default_code = "shutting_down"


class QuotaExceeded(GatewayError):
    """A key's stored responses fill its share of the response store (store.max_bytes_per_key):
    OpenAI's 429 for a spent quota, which waiting a moment does not cure."""

    status = 429
    type = "insufficient_quota"
    default_code = "insufficient_quota"


class StoreUnavailable(GatewayError):
    """The response store (Redis, SQLite) failed: a stored conversation cannot be read
    or written, and answering as if it could would lose it without a word."""

    status = 503
    default_code = "store_unavailable"


class Overloaded(GatewayError):
    """Every engine replica is at ``upstream.max_in_flight`` and the gateway's queue is
    full, or the request waited there for ``upstream.queue.timeout``."""

    status = 503
    default_code = "engine_overloaded"


class UpstreamError(GatewayError):
    """The engine failed in a way the client cannot fix."""

    status = 502
    type = "upstream_error"
    default_code = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    """No connection to the engine (refused, or the connect timed out): nothing was
    sent, so the request may safely go to another replica."""

    default_code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    """The engine did not answer (or went silent mid-stream) within the configured time."""

    status = 504
    default_code = "upstream_timeout"


class UpstreamUnavailable(UpstreamError):
    """No engine replica is available right now; retry later."""

    status = 503
    default_code = "upstream_unavailable"


class UpstreamProtocolError(UpstreamError):
    """The engine answered something that is not valid HTTP/SSE/JSON where it must be."""

    default_code = "upstream_protocol_error"


class AnswerViolation(UpstreamError):
    """The engine's answer broke what the request asked for (its schema, its tool choice,
    one call only): ``param`` is the path in the answer, ``check`` the policy's answer
    check that found it, ``keyword`` the JSON-Schema keyword broken (if one was),
    ``enforced`` False where the check only reports."""

    default_code = "answer_violates_schema"

    def __init__(
        self,
        message: str,
        *,
        param: str,
        code: str,
        check: str,
        keyword: str | None = None,
        enforced: bool = True,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.check = check
        self.keyword = keyword
        self.enforced = enforced
