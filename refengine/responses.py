"""Response bodies and SSE chunks in OpenAI's wire format."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """What the handlers know about one response while they build it."""

    route: str  # "chat" | "completion"
    model: str
    prompt_tokens: int
    cache_details: bool = False  # report usage.prompt_tokens_details (a prefix cache is on)
    cached_tokens: int = 0
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        prefix = "chatcmpl" if self.route == "chat" else "cmpl"
        self.id = self.id or f"{prefix}-{secrets.token_hex(12)}"

    @property
    def object(self) -> str:
        return "chat.completion" if self.route == "chat" else "text_completion"

    def usage(self, completion_tokens: int) -> dict[str, Any]:
        """OpenAI's usage object (with ``prompt_tokens_details.cached_tokens`` when the
        engine has a prefix cache)."""
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }
        if self.cache_details:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage

    def body(
        self,
        text: str,
        finish_reason: str,
        completion_tokens: int,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The whole non-streaming response (chat: with ``tool_calls`` when it calls tools,
        its content then null unless it has text)."""
        choice: dict[str, Any] = {"index": 0}
        if self.route == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if tool_calls:
                message["content"] = text or None
                message["tool_calls"] = tool_calls
            choice["message"] = message
        else:
            choice["text"] = text
        choice |= {"logprobs": None, "finish_reason": finish_reason}
        return {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(completion_tokens),
        }

    def chunk(
        self,
        *,
        text: str | None = None,
        role: bool = False,
        finish_reason: str | None = None,
        with_usage_key: bool = False,
        tool_call: dict[str, Any] | None = None,
    ) -> bytes:
        """One ``data:`` event carrying a text delta, a piece of a tool call (OpenAI's
        ``delta.tool_calls[i]``: the first with its id and name, then pieces of its
        ``function.arguments``) and/or a finish reason."""
        choice: dict[str, Any] = {"index": 0}
        if self.route == "chat":
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            if tool_call is not None:
                delta["tool_calls"] = [tool_call]
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        choice |= {"logprobs": None, "finish_reason": finish_reason}
        payload = self._chunk_head() | {"choices": [choice]}
        if with_usage_key:
            payload["usage"] = None  # OpenAI: null on every chunk but the usage one
        return sse(payload)

    def usage_chunk(self, completion_tokens: int) -> bytes:
        """The final ``include_usage`` chunk: empty choices, the usage."""
        return sse(self._chunk_head() | {"choices": [], "usage": self.usage(completion_tokens)})

    def _chunk_head(self) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.route == "chat" else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}


def sse(payload: dict[str, Any]) -> bytes:
    """``data: {json}\\n\\n``."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
