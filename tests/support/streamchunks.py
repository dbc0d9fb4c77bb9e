"""Chat stream chunks as the fan-out tests build them, and a stream's payloads read back."""

from __future__ import annotations

import json
from typing import Any

from tests.support.bodies import sse_events


def chunk(
    index: int = 0, *, id: str = "c", text: str = "t", finish: str | None = None, **more: Any
) -> dict[str, Any]:
    """One chat.completion.chunk of choice ``index`` (``more``: further members)."""
    choice = {"index": index, "delta": {"content": text}, "finish_reason": finish}
    return {"id": id, "object": "chat.completion.chunk", "created": 1, "choices": [choice], **more}


def usage_chunk(id: str, completion_tokens: int) -> dict[str, Any]:
    """The usage-only last chunk of a stream (5 prompt tokens)."""
    usage = {"prompt_tokens": 5, "completion_tokens": completion_tokens}
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 2,
        "choices": [],
        "usage": usage,
    }


def payloads(data: bytes) -> list[Any]:
    """A stream's event payloads, parsed ("[DONE]" as the string)."""
    return [
        e.removeprefix("data: ") if e == "data: [DONE]" else json.loads(e.removeprefix("data: "))
        for e in sse_events(data)
    ]
