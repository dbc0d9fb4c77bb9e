"""A chat stream's answer put together from its chunks, for the answer checks at its end.

Each choice's content deltas, its tool calls' name and argument deltas (by their
``index``), its refusal and its finish reason, as a whole chat completion would have
them: answers.py's ``check_chat`` then reads a stream's answer as it reads a whole one.
Only a stream whose request an answer check looks at is put together (the rest are
relayed with no more work).
"""

from __future__ import annotations

from typing import Any


class StreamedChat:
    """The choices of a chat stream so far."""

    __slots__ = ("choices",)

    def __init__(self) -> None:
        # index -> [content parts, refusal parts, tool calls by index, finish reason]
        self.choices: dict[int, list[Any]] = {}

    def feed(self, chunk: dict[str, Any]) -> bool:
        """Take one chunk's choices; whether one of them finished here."""
        finished = False
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            state = self.choices.get(index)
            if state is None:
                state = self.choices[index] = [[], [], {}, None]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str):
                    state[0].append(content)
                refusal = delta.get("refusal")
                if isinstance(refusal, str):
                    state[1].append(refusal)
                for call in delta.get("tool_calls") or ():
                    if isinstance(call, dict):
                        _call_delta(state[2], call)
            if choice.get("finish_reason") is not None:
                state[3] = choice["finish_reason"]
                finished = True
        return finished

    def answer(self) -> dict[str, Any]:
        """The stream's answer as a whole chat completion's ``choices``."""
        choices = []
        for index in sorted(self.choices, key=lambda i: i if isinstance(i, int) else 0):
            content, refusal, calls, finish = self.choices[index]
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(content) if content else None,
                "refusal": "".join(refusal) if refusal else None,
            }
            if calls:
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                    }
                    for _, call in sorted(
                        calls.items(), key=lambda kv: kv[0] if isinstance(kv[0], int) else 0
                    )
                ]
            choices.append({"index": index, "message": message, "finish_reason": finish})
        return {"choices": choices}


def _call_delta(calls: dict[Any, dict[str, Any]], delta: dict[str, Any]) -> None:
    index = delta.get("index", 0)
    call = calls.get(index)
    if call is None:
        call = calls[index] = {"id": None, "name": None, "arguments": []}
    if delta.get("id") is not None:
        call["id"] = delta["id"]
    function = delta.get("function")
    if isinstance(function, dict):
        if isinstance(function.get("name"), str):
            call["name"] = (call["name"] or "") + function["name"]
        if isinstance(function.get("arguments"), str):
            call["arguments"].append(function["arguments"])
