"""Bodies of the OpenAI API as the tests send them and the fake engines answer them,
and the checks that read them back. Standard library only: the fake engine uses it."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

MODEL = "Qwen3.8-Flash-Next"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MESSAGES: Any = [{"role": "user", "content": "hi"}]
DONE = b"data: [DONE]\n\n"
# Turns thinking off in the reference engine's (Qwen3-style) chat template.
NO_THINKING: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": False}}
ERROR_KEYS = {"message", "type", "param", "code"}


def chat(**fields: Any) -> dict[str, Any]:
    """A chat completion request: the model, one user message, and ``fields``."""
    return {"model": MODEL, "messages": MESSAGES, **fields}


def completion(content: str = "Hello", *, model: str = MODEL) -> dict[str, Any]:
    """A non-streaming chat completion, as an engine answers one."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


# The canned answer of the mocked engines.
ANSWER = completion()


def sse(payload: Any) -> bytes:
    """``payload`` as one SSE ``data:`` event."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def chunk_event(content: str, *, model: str = MODEL, finish: str | None = None) -> bytes:
    """One streamed chat completion chunk, as an SSE event."""
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [choice],
        }
    )


_FINGERPRINT = re.compile(rb'"system_fingerprint":"fp_[0-9a-f]{10}",')


def without_fingerprint(data: bytes) -> bytes:
    """``data`` without the ``system_fingerprint`` members the gateway inserts into an
    engine's answer or chunks that lack one (gateway/proxy/fingerprint.py)."""
    return _FINGERPRINT.sub(b"", data)


def sse_events(body: str | bytes) -> list[str]:
    """The events of an SSE body, without the blank lines that end them."""
    text = body.decode() if isinstance(body, bytes) else body
    return [e for e in text.replace("\r\n", "\n").split("\n\n") if e]


def error_event(body: str | bytes) -> dict[str, Any]:
    """The error event that ends a broken stream: OpenAI-shaped, followed by [DONE]."""
    events = sse_events(body)
    assert events[-1] == "data: [DONE]", events[-3:]
    error: dict[str, Any] = json.loads(events[-2].removeprefix("data: "))["error"]
    assert set(error) == ERROR_KEYS
    return error


def openai_error(response: httpx.Response, status: int, **expected: Any) -> dict[str, Any]:
    """The OpenAI-shaped JSON error of ``response``, checked to have ``status`` and the
    ``expected`` values (``code=...``, ``param=...``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == ERROR_KEYS
    assert isinstance(error["message"], str) and error["message"]
    for key, value in expected.items():
        assert error[key] == value, (key, error)
    return error
