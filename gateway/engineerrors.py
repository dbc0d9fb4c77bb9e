"""Engine error bodies in other shapes, normalised to OpenAI's.

vLLM sends ``{"error": {..., "code": 400}}`` (an integer code, which breaks some
SDK parsers); SGLang's non-streaming errors are flat ``{"object": "error", ...}``;
llama.cpp's Python server answers validation errors with a 500 whose message
holds its file paths. Clients get ``{"error": {message, type, param, code}}``
with a string-or-null code, and a 5xx never carries the engine's own text.
"""

from __future__ import annotations

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


def _generic(status: int) -> dict[str, Any]:
    return {
        "error": {
            "message": f"The engine failed to process the request (HTTP {status}).",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_error",
        }
    }


def normalise_error_body(status: int, body: bytes) -> bytes:
    """An OpenAI-shaped error body for an engine error answer (status >= 400)."""
    if status >= 500:
        return orjson.dumps(_generic(status))
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        inner: dict[str, Any] = data["error"]
    elif isinstance(data, dict) and ("message" in data or data.get("object") == "error"):
        inner = data
    else:
        return orjson.dumps(_generic(status))
    message = inner.get("message")
    if not isinstance(message, str) or not message:
        message = f"The engine rejected the request (HTTP {status})."
    kind = inner.get("type")
    if kind not in _OPENAI_TYPES:
        kind = "invalid_request_error"
    param = inner.get("param")
    code = inner.get("code")
    return orjson.dumps(
        {
            "error": {
                "message": message[:MAX_MESSAGE],
                "type": kind,
                "param": param if isinstance(param, str) else None,
                "code": code if isinstance(code, str) else None,
            }
        }
    )
