"""An engine app whose chat requests the test holds and releases, several of which can
share one Condition so a test waits for arrivals across them (``arrivals``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.bodies import CHAT, MODEL


class HeldEngine:
    """An engine that can hold each chat request until the test releases it."""

    def __init__(self, changed: asyncio.Condition) -> None:
        self.hold = True
        self.arrived = 0
        self.bodies: list[dict[str, Any]] = []  # every chat request's body, in arrival order
        self.waiting: list[asyncio.Future[None]] = []
        self.changed = changed  # shared by all engines of a test: notified on each arrival
        self.app = Starlette(
            routes=[
                Route(CHAT, self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        async with self.changed:
            self.bodies.append(body)
            self.arrived += 1
            self.changed.notify_all()
        if self.hold:
            future = asyncio.get_running_loop().create_future()
            self.waiting.append(future)
            await future
        return JSONResponse(
            {
                "id": f"chatcmpl-{self.arrived}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        )

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL}]})

    def release(self) -> None:
        for future in self.waiting:
            future.set_result(None)
        self.waiting.clear()

    def let_go(self) -> None:
        """Hold nothing more and release what is held: before the engine's server stops
        (uvicorn's stop waits for every request it has, so a test that failed while
        holding one would otherwise hang there rather than report its failure)."""
        self.hold = False
        self.release()


async def arrivals(engines: list[HeldEngine], total: int) -> list[int]:
    """Wait until the engines have seen ``total`` requests together; their counts."""
    changed = engines[0].changed
    async with changed:
        await asyncio.wait_for(
            changed.wait_for(lambda: sum(e.arrived for e in engines) >= total), 60
        )
    counts = [e.arrived for e in engines]
    assert sum(counts) == total, counts
    return counts
