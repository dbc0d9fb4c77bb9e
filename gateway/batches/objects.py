"""The Batch API's objects as OpenAI writes them: the Batch, its errors, the lines of its
output and error files."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import GatewayError

# What a batch's ``completion_window`` may be (OpenAI's only value), in seconds.
WINDOWS = {"24h": 86400}


def batch_object(
    batch_id: str,
    *,
    endpoint: str,
    input_file_id: str,
    completion_window: str,
    metadata: dict[str, str] | None,
    created_at: int,
) -> dict[str, Any]:
    """A new Batch, validating: every field OpenAI's has, those not reached yet null."""
    return {
        "id": batch_id,
        "object": "batch",
        "endpoint": endpoint,
        "model": None,
        "errors": None,
        "input_file_id": input_file_id,
        "completion_window": completion_window,
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": created_at,
        "in_progress_at": None,
        "expires_at": created_at + WINDOWS[completion_window],
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "usage": None,
        "metadata": metadata,
    }


def batch_error(
    code: str, message: str, *, line: int | None = None, param: str | None = None
) -> dict[str, Any]:
    """One entry of a failed batch's ``errors.data``."""
    return {"code": code, "message": message, "param": param, "line": line}


def output_line(line_id: str, custom_id: str, *, status: int, request_id: str, body: Any) -> bytes:
    """A line of the output or error file: the answer the client would have got."""
    return orjson.dumps(
        {
            "id": line_id,
            "custom_id": custom_id,
            "response": {"status_code": status, "request_id": request_id, "body": body},
            "error": None,
        }
    )


def refused_line(line_id: str, custom_id: str, exc: GatewayError, *, request_id: str) -> bytes:
    """The error file's line of a request the gateway refused before any engine saw it:
    the status and body the live route answers it with."""
    return output_line(
        line_id, custom_id, status=exc.status, request_id=request_id, body=exc.openai_error()
    )


def unanswered_line(line_id: str, custom_id: str, code: str, message: str) -> bytes:
    """The error file's line of a request that got no answer (the batch was cancelled or
    expired before it was sent): OpenAI's ``error`` with no ``response``."""
    return orjson.dumps(
        {
            "id": line_id,
            "custom_id": custom_id,
            "response": None,
            "error": {"code": code, "message": message},
        }
    )
