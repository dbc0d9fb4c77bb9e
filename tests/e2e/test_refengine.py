"""The whole chain: openai SDK -> gateway -> reference engine on the per-row sampler.

Seeded requests are replayed while other requests of different lengths share
the engine's batch: with the patched sampler the answer is byte-identical every
time; with ``--unpatched-sampler`` (one random stream for the whole batch, as
ft serve before its fix) it is not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest

from refengine.server import create_app as create_engine
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_in_front_of
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def chain(*, unpatched: bool = False) -> AsyncIterator[tuple[openai.AsyncOpenAI, Any]]:
    engine_app = create_engine(unpatched_sampler=unpatched, max_batch=16)
    async with (
        running_server(engine_app) as engine_url,
        gateway_in_front_of(engine_url) as gateway_url,
        sdk(gateway_url) as client,
    ):
        yield client, engine_app.state.engine


CAT: Any = [{"role": "user", "content": "Invent a name for a cat."}]


async def seeded(client: openai.AsyncOpenAI, seed: int) -> str:
    answer = await client.chat.completions.create(
        model=MODEL,
        messages=CAT,
        max_tokens=24,
        temperature=1.0,
        seed=seed,
        extra_body=NO_THINKING,
    )
    return answer.choices[0].message.content or ""


async def neighbour(client: openai.AsyncOpenAI, index: int) -> None:
    await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"Tell me about topic number {index}."}],
        max_tokens=4 + 5 * index,  # different lengths: rows join and leave the batch
        temperature=0.8,
    )


async def replay_under_load(client: openai.AsyncOpenAI, seed: int, rounds: int) -> list[str]:
    texts = []
    for _ in range(rounds):
        results = await asyncio.gather(
            *(neighbour(client, i) for i in range(4)),
            seeded(client, seed),
            *(neighbour(client, i) for i in range(4, 8)),
        )
        text = results[4]
        assert isinstance(text, str)
        texts.append(text)
    return texts


async def test_seeded_request_is_identical_whatever_shares_the_batch() -> None:
    async with chain() as (client, engine):
        alone = await seeded(client, 1234)
        texts = await replay_under_load(client, 1234, rounds=3)
        assert engine.stats.max_batch_seen > 1  # the batch really was shared
    assert alone
    assert texts == [alone] * 3


async def test_different_seeds_give_different_text() -> None:
    async with chain() as (client, _):
        answers = {await seeded(client, seed) for seed in (1, 2, 3)}
    assert len(answers) == 3


async def test_unpatched_sampler_breaks_seeded_replays() -> None:
    async with chain(unpatched=True) as (client, _):
        texts = [await seeded(client, 1234)]
        texts += await replay_under_load(client, 1234, rounds=3)
    assert len(set(texts)) > 1


async def test_gateway_rejects_what_the_engine_would_silently_ignore() -> None:
    async with chain() as (client, engine):
        before = engine.stats.admitted
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model=MODEL, messages=CAT, max_tokens=5, logprobs=True
            )
        assert info.value.param == "logprobs"
        assert engine.stats.admitted == before
