"""Engine error bodies in other shapes, normalised to OpenAI's, safe by construction.

vLLM sends ``{"error": {..., "code": 400}}`` (an integer code, which breaks some
SDK parsers); SGLang's non-streaming errors are flat ``{"object": "error", ...}``;
llama.cpp's Python server answers validation errors with a 500 whose message
holds its file paths. Clients get ``{"error": {message, type, param, code}}``
with a string-or-null code. A 5xx never carries the engine's own text; a 4xx's
message, param, code and type pass only in the shapes of safetext.py (words of a
validation message, a field path, OpenAI's codes and types), after every known
secret is removed: nothing an engine repeats (its own key, a host, a path) can
reach a client through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.proxy.safetext import safe_code, safe_message, safe_param, safe_type


def _generic_inner(status: int) -> dict[str, Any]:
    return {
        "message": f"The engine failed to process the request (HTTP {status}).",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }


def normalise_error(status: int, body: bytes, *, secrets: Sequence[str] = ()) -> dict[str, Any]:
    """OpenAI's inner error object for an engine error answer (status >= 400), with
    ``secrets`` (safetext.known_secrets) removed."""
    if status >= 500:
        return _generic_inner(status)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        return _generic_inner(status)
    return engine_error_object(data, status=status, secrets=secrets)


def engine_error_object(
    data: dict[str, Any], *, status: int | None, secrets: Sequence[str] = ()
) -> dict[str, Any]:
    """OpenAI's inner error object for an engine's error value. ``status`` None: an
    error event mid-stream, judged by its own integer ``code`` (vLLM puts the
    HTTP status there); without one it counts as a server error."""
    if isinstance(data.get("error"), dict):
        inner: dict[str, Any] = data["error"]
    elif "message" in data or data.get("object") == "error":
        inner = data
    else:
        return _generic_inner(status or 500)
    if status is None:
        code = inner.get("code")
        status = code if isinstance(code, int) and 400 <= code < 500 else 500
    if status >= 500:
        return _generic_inner(status)
    message = safe_message(inner.get("message"), secrets)
    return {
        "message": message or f"The engine rejected the request (HTTP {status}).",
        "type": safe_type(inner.get("type")),
        "param": safe_param(inner.get("param"), secrets),
        "code": safe_code(inner.get("code")),
    }


def scrubbed(error: dict[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """An error object already normalised (its shapes safe), checked again against the
    request's ``secrets``, which were not known where it was read (a stream's reader)."""
    if not secrets:
        return error
    return {
        "message": safe_message(error.get("message"), secrets) or "The engine failed.",
        "type": error.get("type"),
        "param": safe_param(error.get("param"), secrets),
        "code": error.get("code"),
    }
