"""The routing benchmark's workloads and the client that runs them.

Two workloads, both built from the reference engine's own vocabulary (words
it does not know would all be the same ``<unk>`` token and share prefixes
no real text would):

- ``multi-turn``: many conversations from many clients at once, each a few
  turns long; each turn resends the whole history plus a new question (as
  every chat client does), and conversations share a few system prompts.
- ``skewed``: a few very hot conversations (an agent's context that many
  requests extend at once) among many cold ones.

Each request streams (``include_usage``), so the client records the time to
the first content token and the engine's ``cached_tokens``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from refengine.model import default_model

MODEL = "Qwen3.8-Flash-Next"


@dataclass
class Shape:
    """A workload's size."""

    name: str
    conversations: int  # cold conversations
    turns: int
    concurrency: int  # conversations running at once
    system_prompts: int
    system_words: int
    question_words: int
    hot: int = 0  # hot conversations (skewed)
    hot_requests: int = 0  # requests of each hot one
    hot_concurrency: int = 0  # of each hot one in flight at once
    max_tokens: int = 12
    # Seconds a user reads before the next turn (uniform in [0, think)): without it a
    # conversation's next turn finds its own replica the least loaded one, as no
    # real user's does minutes later.
    think: float = 0.0


MULTI_TURN = Shape(
    "multi-turn",
    conversations=48,
    turns=10,
    concurrency=24,
    system_prompts=4,
    system_words=150,
    question_words=20,
    max_tokens=24,
    think=0.6,
)
SKEWED = Shape(
    "skewed",
    conversations=24,
    turns=4,
    concurrency=8,
    system_prompts=2,
    system_words=150,
    question_words=20,
    hot=3,
    hot_requests=60,
    hot_concurrency=6,
    max_tokens=24,
    think=0.6,
)


@dataclass
class Sample:
    """One request as the client saw it."""

    ttft: float
    prompt_tokens: int
    cached_tokens: int
    ok: bool


@dataclass
class Outcome:
    """A workload's run through one gateway."""

    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0


class Words:
    """Deterministic text from the engine's vocabulary."""

    def __init__(self, seed: int) -> None:
        tokenizer = default_model().tokenizer
        self.words = [w for w in tokenizer.tokens if w.isalpha() and len(w) > 2][:3000]
        self.random = random.Random(seed)

    def text(self, count: int) -> str:
        return " ".join(self.random.choice(self.words) for _ in range(count)) + "."


async def ask(
    client: httpx.AsyncClient, messages: list[dict[str, str]], shape: Shape
) -> tuple[Sample, str]:
    """One streamed chat request: its Sample and the answer's text."""
    body = {
        "model": MODEL,
        "messages": messages,
        "max_tokens": shape.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    ttft = float("nan")
    parts: list[str] = []
    usage: dict[str, Any] | None = None
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                return Sample(float("nan"), 0, 0, False), ""
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                event = orjson.loads(line[6:])
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        if not parts:
                            ttft = time.perf_counter() - start
                        parts.append(text)
                if event.get("usage"):
                    usage = event["usage"]
    except httpx.HTTPError:
        return Sample(float("nan"), 0, 0, False), ""
    if usage is None:
        return Sample(ttft, 0, 0, False), "".join(parts)
    details = usage.get("prompt_tokens_details") or {}
    sample = Sample(ttft, usage["prompt_tokens"], details.get("cached_tokens", 0), True)
    return sample, "".join(parts)


async def _conversation(
    client: httpx.AsyncClient,
    system: str,
    questions: Sequence[str],
    pauses: Sequence[float],
    shape: Shape,
    out: Outcome,
) -> None:
    messages = [{"role": "system", "content": system}]
    for question, pause in zip(questions, pauses, strict=True):
        if len(messages) > 1:
            await asyncio.sleep(pause)  # the user reads the answer
        messages.append({"role": "user", "content": question})
        sample, answer = await ask(client, messages, shape)
        out.samples.append(sample)
        messages.append({"role": "assistant", "content": answer or "(no answer)"})


async def _hot(
    client: httpx.AsyncClient, system: str, context: list[str], shape: Shape, out: Outcome
) -> None:
    """``hot_requests`` requests that each extend one shared context, so many at a time."""
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(context):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    gate = asyncio.Semaphore(shape.hot_concurrency)
    words = Words(len(context))

    async def one(n: int) -> None:
        async with gate:
            follow = [*messages, {"role": "user", "content": words.text(8) + f" ({n})"}]
            out.samples.append((await ask(client, follow, shape))[0])

    await asyncio.gather(*(one(n) for n in range(shape.hot_requests)))


async def run_workload(url: str, shape: Shape, *, seed: int = 7) -> Outcome:
    """Run ``shape`` against the gateway at ``url``; the same requests for any seed."""
    words = Words(seed)
    systems = [words.text(shape.system_words) for _ in range(shape.system_prompts)]
    plans = [
        (
            systems[i % len(systems)],
            [words.text(shape.question_words) for _ in range(shape.turns)],
            [words.random.uniform(0, shape.think) for _ in range(shape.turns)],
        )
        for i in range(shape.conversations)
    ]
    hot_contexts = [[words.text(shape.question_words) for _ in range(6)] for _ in range(shape.hot)]
    out = Outcome()
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        gate = asyncio.Semaphore(shape.concurrency)

        async def cold(system: str, questions: list[str], pauses: list[float]) -> None:
            async with gate:
                await _conversation(client, system, questions, pauses, shape, out)

        start = time.perf_counter()
        await asyncio.gather(
            *(cold(*plan) for plan in plans),
            *(_hot(client, systems[0], context, shape, out) for context in hot_contexts),
        )
        out.seconds = time.perf_counter() - start
    return out
