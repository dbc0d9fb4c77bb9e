"""Engine error bodies in other shapes, normalised to OpenAI's.

vLLM sends ``{"error": {..., "code": 400}}`` (an integer code, which breaks some
SDK parsers); SGLang's non-streaming errors are flat ``{"object": "error", ...}``;
llama.cpp's Python server answers validation errors with a 500 whose message
holds its file paths. Clients get ``{"error": {message, type, param, code}}``
with a string-or-null code; a 5xx never carries the engine's own text, and
neither does a 4xx message that shows the engine's insides (a traceback, a
source path, a private or loopback address).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_OPENAI_TYPES = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "rate_limit_error",
    "server_error",
    "api_error",
}
MAX_MESSAGE = 2000
_INTERNALS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]+\", line \d+"
    r"|(?<![\w.])(?:10|127)(?:\.\d{1,3}){3}(?![\w.])"
    r"|(?<![\w.])192\.168(?:\.\d{1,3}){2}(?![\w.])"
    r"|(?<![\w.])172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}(?![\w.])"
    r"|\blocalhost:\d+|\.svc\.cluster\.local\b|\.internal\b"
    r"|(?:^|[\s'\"(=])/(?:usr|opt|srv|home|root|app|var|tmp|workspace)/"
)


def _generic_inner(status: int) -> dict[str, Any]:
    return {
        "message": f"The engine failed to process the request (HTTP {status}).",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }


def normalise_error(status: int, body: bytes) -> dict[str, Any]:
    """OpenAI's inner error object for an engine error answer (status >= 400)."""
    if status >= 500:
        return _generic_inner(status)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        return _generic_inner(status)
    return engine_error_object(data, status=status)


def engine_error_object(data: dict[str, Any], *, status: int | None) -> dict[str, Any]:
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
    message = inner.get("message")
    if not isinstance(message, str) or not message or _INTERNALS.search(message):
        message = f"The engine rejected the request (HTTP {status})."
    kind = inner.get("type")
    if kind not in _OPENAI_TYPES:
        kind = "invalid_request_error"
    param = inner.get("param")
    code = inner.get("code")
    return {
        "message": message[:MAX_MESSAGE],
        "type": kind,
        "param": param if isinstance(param, str) else None,
        "code": code if isinstance(code, str) else None,
    }
