"""An engine that answers every chat request with the message it is given (content, tool
calls), whole or streamed in pieces: what a grammar backend that drops a keyword, or a
tool mode that answers prose, sends. A Starlette app, for a real loopback server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Script:
    """What the engine answers: its content, its tool calls ((name, arguments) each), its
    finish reason (``tool_calls`` where there are calls, unless given)."""

    content: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    finish: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def finish_reason(self) -> str:
        return self.finish or ("tool_calls" if self.calls else "stop")


def _tool_calls(script: Script) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(script.calls)
    ]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    data = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [choice]}  # fmt: skip
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def _stream(script: Script) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    text = script.content or ""
    for start in range(0, len(text), 4):
        yield _chunk({"content": text[start : start + 4]})
    for index, (name, arguments) in enumerate(script.calls):
        head = {"index": index, "id": f"call_{index}", "type": "function",
                "function": {"name": name, "arguments": ""}}  # fmt: skip
        yield _chunk({"tool_calls": [head]})
        for start in range(0, len(arguments), 5):
            piece = {"index": index, "function": {"arguments": arguments[start : start + 5]}}
            yield _chunk({"tool_calls": [piece]})
    yield _chunk({}, script.finish_reason)
    yield b"data: [DONE]\n\n"


def scripted_engine(script: Script) -> Starlette:
    """The engine's app: POST /v1/chat/completions answers with ``script``."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        if body.get("stream"):
            return StreamingResponse(_stream(script), media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": script.content}
        if script.calls:
            message["tool_calls"] = _tool_calls(script)
        choice = {"index": 0, "message": message, "finish_reason": script.finish_reason}
        usage = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
        return JSONResponse(
            {
                "id": "chatcmpl-s",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [choice],
                "usage": usage,
            }  # fmt: skip
        )

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
