"""The Batch API's test helpers: JSONL input files, a batch polled to its end with the
openai SDK (as users do), its output and error files read back by custom_id, and an
engine wrapper counting what reaches it by X-Request-ID."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import openai
from openai.types import Batch

FINAL = ("failed", "completed", "expired", "cancelled")
DEADLINE = 120.0  # seconds: a loaded 2-core machine runs a 1,000-line batch in far less


def jsonl(lines: list[Any]) -> bytes:
    """A JSONL file of ``lines`` (a str is written as it is: a malformed line)."""
    return b"".join(
        (line if isinstance(line, str) else json.dumps(line)).encode() + b"\n" for line in lines
    )


def request(custom_id: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One line of an input file."""
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def upload(client: openai.OpenAI, content: bytes, name: str = "input.jsonl") -> str:
    """The id of ``content`` uploaded with purpose batch."""
    return client.files.create(file=(name, io.BytesIO(content)), purpose="batch").id


def wait_for(client: openai.OpenAI, batch_id: str, statuses: tuple[str, ...] = FINAL) -> Batch:
    """The batch once its status is one of ``statuses`` (polled, under a deadline)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        if time.monotonic() > deadline:
            raise AssertionError(f"batch {batch_id} still {batch.status} after {DEADLINE} s")
        time.sleep(0.05)


def lines_of(client: openai.OpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    """An output or error file's lines by custom_id (each custom_id once: asserted)."""
    if file_id is None:
        return {}
    rows = [json.loads(line) for line in client.files.content(file_id).text.splitlines()]
    by_id = {row["custom_id"]: row for row in rows}
    assert len(by_id) == len(rows), "a custom_id came back twice"
    return by_id


def same_answer(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two answers agree but for what differs per request (id, created)."""
    strip = ("id", "created", "created_at")
    return {k: v for k, v in one.items() if k not in strip} == {
        k: v for k, v in other.items() if k not in strip
    }


class Received:
    """An ASGI app (served on its own thread) that counts the POSTs reaching it by
    X-Request-ID (``ids``) and those it answered (``answered``); with ``limit`` set it
    answers that many and holds the others until ``release`` is set."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ids: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.limit: int | None = None
        self.admitted = 0  # requests let through while ``limit`` is set
        self.release = threading.Event()

    @property
    def held(self) -> int:
        """Requests received and not answered (yet)."""
        return sum(self.ids.values()) - sum(self.answered.values())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request_id = dict(scope["headers"]).get(b"x-request-id", b"").decode()
        self.ids[request_id] += 1
        if self.limit is not None and self.admitted >= self.limit:
            await asyncio.to_thread(self.release.wait)
        else:
            self.admitted += 1
        await self.app(scope, receive, send)
        self.answered[request_id] += 1


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (a blocking call, run on a thread) until it holds, under a
    deadline."""
    try:
        async with asyncio.timeout(DEADLINE):
            while not await asyncio.to_thread(condition):
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def runner_config(engine_url: str, concurrency: int, **batches: Any) -> dict[str, Any]:
    """A gateway process's config: ``engine_url``, batches polled often, leases short."""
    return {
        "upstream": {"url": engine_url},
        "batches": {
            "poll_seconds": 0.2,
            "lease_seconds": 2,
            "concurrency": concurrency,
            **batches,
        },
    }


def chat_line_body(i: int) -> dict[str, Any]:
    """A short seeded chat request for the reference engine."""
    return {
        "model": "Qwen3.8-Flash-Next",
        "messages": [{"role": "user", "content": f"Line {i} of the old town."}],
        "max_tokens": 4,
        "seed": i,
    }
