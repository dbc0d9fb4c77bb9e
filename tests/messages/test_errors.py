"""Anthropic's error shape (pure): each of the gateway's errors with Anthropic's type and
status, the field's path first as Anthropic writes it, and an engine's error relayed."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.errors import (
    AuthenticationFailed,
    BodyTooLarge,
    GatewayError,
    InvalidRequest,
    LimiterUnavailable,
    ModelNotFound,
    Overloaded,
    RateLimited,
    RequestTimeout,
    ShuttingDown,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
    render,
)
from gateway.messages.errors import ANTHROPIC_ERRORS, anthropic_path, anthropic_status


@pytest.mark.parametrize(
    ("exc", "status", "kind"),
    [
        (InvalidRequest("bad", param="temperature"), 400, "invalid_request_error"),
        (AuthenticationFailed("no key"), 401, "authentication_error"),
        (ModelNotFound("claude-opus-4-8"), 404, "not_found_error"),
        (BodyTooLarge("too big"), 413, "request_too_large"),
        (RequestTimeout("slow"), 408, "invalid_request_error"),
        (
            RateLimited("slow down", kind="tokens", limit="tpm", headers={"Retry-After": "2"}),
            429,
            "rate_limit_error",
        ),
        (GatewayError("failed"), 500, "api_error"),
        (UpstreamError("engine failed"), 500, "api_error"),
        (UpstreamTimeout("engine silent"), 504, "timeout_error"),
        # The 503s a client should retry: Anthropic's 529, which the SDKs retry.
        (Overloaded("queue full"), 529, "overloaded_error"),
        (UpstreamUnavailable("no replica"), 529, "overloaded_error"),
        (ShuttingDown("draining"), 529, "overloaded_error"),
        (LimiterUnavailable("store down"), 529, "overloaded_error"),
    ],
)
def test_each_error_has_anthropics_type_and_status(
    exc: GatewayError, status: int, kind: str
) -> None:
    assert ANTHROPIC_ERRORS.status(exc) == status
    body = orjson.loads(render(exc, shape=ANTHROPIC_ERRORS, request_id="req_1"))
    assert body == {
        "type": "error",
        "error": {"type": kind, "message": body["error"]["message"]},
        "request_id": "req_1",
    }
    assert body["error"]["message"]
    assert render(exc, event=True, shape=ANTHROPIC_ERRORS).startswith(b"event: error\ndata: ")


def test_a_refusal_names_the_path_first_as_anthropic_writes_it() -> None:
    exc = InvalidRequest(
        "Unsupported value: 'messages[2].content[1].type' does not support 'image'.",
        param="messages[2].content[1].type",
    )
    message = orjson.loads(ANTHROPIC_ERRORS.body(exc))["error"]["message"]
    assert message == (
        "messages.2.content.1.type: Unsupported value: 'messages.2.content.1.type' does not "
        "support 'image'."
    )
    assert anthropic_path("tools[0].input_schema") == "tools.0.input_schema"


def test_mid_stream_the_error_is_an_event() -> None:
    out = ANTHROPIC_ERRORS.event(Overloaded("Overloaded"))
    name, data = out.decode().strip().split("\n")
    assert name == "event: error"
    assert orjson.loads(data[6:]) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, (400, "invalid_request_error")),
        (403, (403, "permission_error")),
        (422, (422, "invalid_request_error")),
        (402, (402, "billing_error")),
        (500, (500, "api_error")),
        (502, (500, "api_error")),
        (503, (529, "overloaded_error")),
        (504, (504, "timeout_error")),
        (529, (529, "overloaded_error")),
    ],
)
def test_statuses(status: int, expected: tuple[int, str]) -> None:
    assert anthropic_status(status) == expected


def test_an_engine_error_is_relayed_in_anthropics_shape() -> None:
    inner: dict[str, Any] = {
        "message": "prompt is too long",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    status, body = ANTHROPIC_ERRORS.relayed(400, inner, "req_1")
    assert status == 400
    assert orjson.loads(body) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long"},
        "request_id": "req_1",
    }
