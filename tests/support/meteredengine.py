"""An engine that reports usage the way OpenAI and vLLM do, deterministically, for the
metering and rate-limit tests: a raw ASGI app run under uvicorn (``running_server``).

A completion has one token per word of ``WORDS`` up to ``max_tokens`` (default 5), its
prompt ``1 + len(content words)`` tokens. Streams send one chunk per token; with
``stream_options.include_usage`` every chunk carries ``"usage": null`` and one last chunk
(``choices: []``) the usage, then ``data: [DONE]``. Ids and timestamps are fixed, so
two identical requests get identical bytes. ``reported`` sums the usage it sent;
``hold`` (an asyncio.Event) keeps streams open after their first chunk until it is set.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.support.asgi import read_body
from tests.support.bodies import MODEL

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "prompt" in body:
        return 1 + len(str(body["prompt"]).split())
    return 1 + sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))


class MeteredEngine:
    """The ASGI app; ``reported`` is the sum of the usage it sent (prompt, completion)."""

    def __init__(self) -> None:
        self.reported = [0, 0]
        self.bodies: list[dict[str, Any]] = []
        self.hold: asyncio.Event | None = None
        self.open_streams = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["path"] == "/v1/models":
            await self._json(send, {"object": "list", "data": [{"id": "m"}, {"id": MODEL}]})
            return
        body = json.loads(await read_body(receive))
        self.bodies.append(body)
        chat = scope["path"].endswith("/chat/completions")
        count = min(int(body.get("max_tokens") or 5), len(WORDS))
        prompt = _prompt_tokens(body)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": count,
            "total_tokens": prompt + count,
        }
        self.reported[0] += prompt
        self.reported[1] += count
        head = {"id": "cmpl-fixed", "created": 1700000000, "model": body.get("model", "m")}
        if not body.get("stream"):
            text = " ".join(WORDS[:count])
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            choice |= (
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            await self._json(send, {**head, "object": "x", "choices": [choice], "usage": usage})
            return
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        self.open_streams += 1
        try:
            for i in range(count):
                delta = {"content": WORDS[i] + " "} if chat else None
                choice = {"index": 0, "finish_reason": "length" if i == count - 1 else None}
                choice |= {"delta": delta} if chat else {"text": WORDS[i] + " "}
                chunk: dict[str, Any] = {**head, "object": "chunk", "choices": [choice]}
                if with_usage:
                    chunk["usage"] = None
                await send({"type": "http.response.body", "body": _sse(chunk), "more_body": True})
                if i == 0 and self.hold is not None:
                    await self.hold.wait()
            if with_usage:
                last = _sse({**head, "object": "chunk", "choices": [], "usage": usage})
                await send({"type": "http.response.body", "body": last, "more_body": True})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        finally:
            self.open_streams -= 1

    async def _json(self, send: Any, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})
