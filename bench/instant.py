"""An engine in this process: an UpstreamClient that answers every request at once, with
no socket, so that a bench times only the gateway's side (the tracing cost scenario) or only
the balancer (the routing one).

The answer is a chat completion already in memory, or, when the request body asks for a
stream, three events, a usage chunk and ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway._types import Headers
from gateway.routing.hint import NO_HINT, Hint

MODEL = "Qwen3.8-Flash-Next"
_ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
    }
)  # fmt: skip


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _delta(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return _event({"id": "chatcmpl-1", "model": MODEL, "choices": [choice]})


_STREAM = [
    _delta("Hel"),
    _delta("lo"),
    _delta("!", "stop"),
    _event({"id": "chatcmpl-1", "model": MODEL, "choices": [], "usage": {"prompt_tokens": 12}})
    + b"data: [DONE]\n\n",
]


class _Response:
    """An engine answer already in memory."""

    def __init__(self, stream: bool) -> None:
        self.status = 200
        kind = b"text/event-stream" if stream else b"application/json"
        self.headers: Headers = [(b"content-type", kind)]

    async def chunks(self) -> AsyncIterator[bytes]:
        for part in _STREAM:
            yield part

    async def read(self, limit: int) -> bytes:
        return _ANSWER

    def finish(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class InstantEngine:
    """An UpstreamClient that answers every request at once, as a stream if asked."""

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> _Response:
        return _Response(b'"stream":true' in body)

    async def aclose(self) -> None:
        return None
