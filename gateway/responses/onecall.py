"""``parallel_tool_calls: false`` enforced by the gateway, whatever the engine does.

Not every chat engine honours the flag, so it is never sent: the gateway keeps
the answer's first tool call and leaves the others out, as vLLM does when it is
asked for one call (a whole answer's ``tool_calls[1:]``; in a stream, the
deltas of any call whose ``index`` is not the first one seen).
"""

from __future__ import annotations

from typing import Any

from gateway.responses.stream import StreamTranslator


def wants_one_call(request: dict[str, Any]) -> bool:
    """Whether the client asked for at most one tool call per answer."""
    return request.get("parallel_tool_calls") is False


def first_call_only(chat: dict[str, Any]) -> dict[str, Any]:
    """A whole chat completion with its first choice's tool calls cut to the first."""
    for choice in chat.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list) and len(calls) > 1:
            message["tool_calls"] = calls[:1]
    return chat


class FirstCallFilter:
    """Stream chunks with the deltas of every tool call after the first left out."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: Any = None

    def __call__(self, chunk: dict[str, Any]) -> dict[str, Any]:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            calls = delta.get("tool_calls")
            if not isinstance(calls, list):
                continue
            kept = []
            for call in calls:
                index = call.get("index", 0) if isinstance(call, dict) else None
                if self.first is None:
                    self.first = index
                if index == self.first:
                    kept.append(call)
            if kept:
                delta["tool_calls"] = kept
            else:
                del delta["tool_calls"]
        return chunk


class OneCallTranslator(StreamTranslator):
    """A StreamTranslator that keeps only the answer's first tool call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep = FirstCallFilter()

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        return super().chunk(self.keep(chunk))
