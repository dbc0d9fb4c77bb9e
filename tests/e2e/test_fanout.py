"""``n`` end to end: the openai SDK -> the gateway -> the reference engine, which makes
one choice per request and ignores ``n``. The gateway's fan-out makes it answer ``n``
as OpenAI does, on both routes, streaming and not; with a seed, reproducibly."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from refengine.server import create_app as create_engine
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_in_front_of
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio

CAT: Any = [{"role": "user", "content": "Invent a name for a cat."}]
PROMPT = "Once upon a time"


@pytest.fixture
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    async with (
        running_server(create_engine(max_batch=16)) as engine_url,
        gateway_in_front_of(engine_url) as gateway_url,
        sdk(gateway_url) as client,
    ):
        yield client


async def chat_texts(client: openai.AsyncOpenAI, *, stream: bool, **fields: Any) -> list[str]:
    """The choices' texts in index order (a stream's deltas joined per index)."""
    options: dict[str, Any] = {"max_tokens": 16, "temperature": 1.0, "extra_body": NO_THINKING}
    if not stream:
        answer = await client.chat.completions.create(
            model=MODEL, messages=CAT, **options, **fields
        )
        assert [c.index for c in answer.choices] == list(range(len(answer.choices)))
        assert answer.usage is not None
        return [c.message.content or "" for c in answer.choices]
    texts: defaultdict[int, str] = defaultdict(str)
    ids = set()
    chunks = await client.chat.completions.create(
        model=MODEL, messages=CAT, stream=True, **options, **fields
    )
    async for chunk in chunks:
        ids.add(chunk.id)
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert len(ids) == 1
    return [texts[i] for i in sorted(texts)]


async def completion_texts(client: openai.AsyncOpenAI, *, stream: bool, **fields: Any) -> list[str]:
    options: dict[str, Any] = {"max_tokens": 16, "temperature": 1.0}
    if not stream:
        answer = await client.completions.create(model=MODEL, prompt=PROMPT, **options, **fields)
        assert [c.index for c in answer.choices] == list(range(len(answer.choices)))
        return [c.text for c in answer.choices]
    texts: defaultdict[int, str] = defaultdict(str)
    chunks = await client.completions.create(
        model=MODEL, prompt=PROMPT, stream=True, **options, **fields
    )
    async for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
    return [texts[i] for i in sorted(texts)]


TEXTS = {"chat": chat_texts, "completions": completion_texts}


@pytest.mark.parametrize("route", ["chat", "completions"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_n_gives_n_seeded_choices_the_same_every_time(
    client: openai.AsyncOpenAI, route: str, stream: bool
) -> None:
    texts = TEXTS[route]
    first = await texts(client, stream=stream, n=3, seed=1234)
    again = await texts(client, stream=stream, n=3, seed=1234)
    assert len(first) == 3 and all(first)
    assert again == first  # reproducible with a seed
    assert len(set(first)) == 3  # and different from each other
    # Choice 0 is what n: 1 with the same seed gives; streaming or not, the same text.
    assert (await texts(client, stream=stream, seed=1234))[0] == first[0]
    assert await texts(client, stream=not stream, n=3, seed=1234) == first


@pytest.mark.parametrize("route", ["chat", "completions"])
async def test_n_without_a_seed_gives_n_choices(client: openai.AsyncOpenAI, route: str) -> None:
    for stream in (False, True):
        assert len(await TEXTS[route](client, stream=stream, n=3)) == 3


async def test_usage_counts_the_prompt_once(client: openai.AsyncOpenAI) -> None:
    one = await client.chat.completions.create(
        model=MODEL, messages=CAT, max_tokens=8, seed=7, extra_body=NO_THINKING
    )
    three = await client.chat.completions.create(
        model=MODEL, messages=CAT, max_tokens=8, seed=7, n=3, extra_body=NO_THINKING
    )
    assert one.usage is not None and three.usage is not None
    assert three.usage.prompt_tokens == one.usage.prompt_tokens
    assert three.usage.completion_tokens > one.usage.completion_tokens
    streamed = await client.chat.completions.create(
        model=MODEL,
        messages=CAT,
        max_tokens=8,
        seed=7,
        n=3,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=NO_THINKING,
    )
    usages = [chunk.usage async for chunk in streamed if chunk.usage is not None]
    assert [u.model_dump(exclude_none=True) for u in usages] == [
        three.usage.model_dump(exclude_none=True)
    ]


async def test_n_above_the_maximum_is_refused_before_the_engine(
    client: openai.AsyncOpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model=MODEL, messages=CAT, n=9)
    assert info.value.param == "n"
    assert info.value.code == "integer_above_max_value"
