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


def _response(script: Script, status: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if script.content is not None:
        part = {"type": "output_text", "text": script.content, "annotations": []}
        output.append({"type": "message", "id": "msg_s", "role": "assistant",
                       "status": "completed", "content": [part]})  # fmt: skip
    for index, (name, arguments) in enumerate(script.calls):
        output.append({"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}",
                       "name": name, "arguments": arguments, "status": "completed"})  # fmt: skip
    return {"id": "resp_s", "object": "response", "created_at": 1, "model": "m",
            "status": status, "output": output if status == "completed" else [],
            "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}}  # fmt: skip


def _event(kind: str, sequence: int, **data: Any) -> bytes:
    payload = json.dumps({"type": kind, "sequence_number": sequence, **data})
    return f"event: {kind}\ndata: {payload}\n\n".encode()


async def _responses_stream(script: Script) -> AsyncIterator[bytes]:
    yield _event("response.created", 0, response=_response(script, "in_progress"))
    text = script.content or ""
    for index, start in enumerate(range(0, len(text), 4)):
        yield _event("response.output_text.delta", index + 1, item_id="msg_s", output_index=0,
                     content_index=0, delta=text[start : start + 4])  # fmt: skip
    yield _event("response.completed", 99, response=_response(script, "completed"))


def scripted_engine(script: Script) -> Starlette:
    """The engine's app: POST /v1/chat/completions answers with ``script``, and so does
    POST /v1/responses (the engine's own Responses route: native mode)."""

    async def responses(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        if body.get("stream"):
            return StreamingResponse(_responses_stream(script), media_type="text/event-stream")
        return JSONResponse(_response(script, "completed"))

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

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
        ]
    )
