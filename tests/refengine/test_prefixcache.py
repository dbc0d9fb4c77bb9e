"""The reference engine's prefix cache and prefill model: chained blocks, LRU, the real
count in usage.prompt_tokens_details.cached_tokens, and the time of uncached prefill."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from refengine import create_app
from refengine.cli import main, parse_args
from refengine.model import default_model
from refengine.prefixcache import Prefill, PrefixCache
from refengine.template import render_chat
from tests.support.bodies import CHAT, COMPLETIONS, MODEL, NO_THINKING
from tests.support.sdk import sdk
from tests.support.servers import running_server

SYSTEM = "You are a careful assistant. " * 20


def test_a_prefix_hits_in_whole_blocks_only() -> None:
    cache = PrefixCache(block_size=4, capacity=100)
    cache.insert(list(range(10)))  # blocks [0..3], [4..7]; 8, 9 are not a full block
    assert len(cache) == 2
    assert cache.match(list(range(10))) == 8
    assert cache.match([*range(8), 99, 98]) == 8
    assert cache.match([*range(6), 77, 7]) == 4  # the second block differs
    assert cache.match([0, 1, 2]) == 0


def test_blocks_are_chained_so_the_same_block_after_another_prefix_misses() -> None:
    cache = PrefixCache(block_size=2, capacity=100)
    cache.insert([1, 2, 3, 4])
    assert cache.match([3, 4]) == 0  # [3, 4] is cached only after [1, 2]
    assert cache.match([1, 2, 3, 4]) == 4


def test_the_least_recently_used_blocks_are_evicted() -> None:
    cache = PrefixCache(block_size=2, capacity=4)
    cache.insert([1, 1, 2, 2])
    cache.insert([5, 5, 6, 6])
    assert cache.match([1, 1, 2, 2]) == 4  # now the most recently used
    assert cache.insert([7, 7, 8, 8]) == 2  # evicts [5, 5], [6, 6]
    assert cache.match([5, 5, 6, 6]) == 0
    assert cache.match([1, 1, 2, 2]) == 4


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        PrefixCache(block_size=0)
    with pytest.raises(ValueError):
        Prefill(seconds_per_token=-1)


@pytest.mark.anyio
async def test_prefill_keeps_the_last_token_uncached_and_counts() -> None:
    prefill = Prefill(cache=PrefixCache(block_size=4, capacity=100))
    assert await prefill.run(list(range(8))) == 0
    # All 8 cached, but the last token is computed again: only the first block counts.
    assert await prefill.run(list(range(8))) == 4
    assert await prefill.run(list(range(9))) == 8
    assert prefill.stats.prompt_tokens == 25 and prefill.stats.cached_tokens == 12
    assert await Prefill().run([1, 2, 3]) == 0  # no cache: nothing cached


@pytest.mark.anyio
async def test_prefill_of_uncached_tokens_takes_one_at_a_time() -> None:
    prefill = Prefill(seconds_per_token=0.001, cache=None)
    order: list[str] = []

    async def one(name: str) -> None:
        await prefill.run([1] * 5)
        order.append(name)

    first = asyncio.create_task(one("a"))
    second = asyncio.create_task(one("b"))
    await asyncio.sleep(0)
    assert prefill._compute.locked()  # "a" computes, "b" waits for the compute
    await asyncio.gather(first, second)
    assert order == ["a", "b"]


def conversation(turns: int) -> Any:
    messages = [{"role": "system", "content": SYSTEM}]
    for i in range(turns):
        if i:
            messages.append({"role": "assistant", "content": f"The answer {i} is short."})
        messages.append({"role": "user", "content": f"Tell me about the list number {i}."})
    return messages


@pytest.fixture
async def cached_engine() -> AsyncIterator[str]:
    app = create_app(prefix_cache_blocks=1024, block_size=16, prefill_ms_per_token=0.01)
    async with running_server(app) as url:
        yield url


@pytest.mark.anyio
async def test_cached_tokens_grow_over_a_conversations_turns(cached_engine: str) -> None:
    seen = []
    async with sdk(cached_engine) as client:
        for turns in (1, 2, 3):
            answer = await client.chat.completions.create(
                model=MODEL, messages=conversation(turns), max_tokens=4, extra_body=NO_THINKING
            )
            usage = answer.usage
            assert usage is not None and usage.prompt_tokens_details is not None
            seen.append((usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens))
    tokenizer = default_model().tokenizer
    prompts = [
        tokenizer.encode(render_chat(conversation(t), enable_thinking=False)) for t in (1, 2, 3)
    ]
    assert [p for p, _ in seen] == [len(p) for p in prompts]
    # Each later turn finds the earlier turn's prompt in the cache up to where they part
    # (the earlier prompt ends with the empty thinking block), in whole blocks of 16.
    expected = [0] + [_common(prompts[t - 1], prompts[t]) // 16 * 16 for t in (1, 2)]
    assert [c for _, c in seen] == expected
    assert expected[1] > 0 and expected[2] > expected[1]


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.anyio
async def test_streaming_usage_and_completions_report_cached_tokens(cached_engine: str) -> None:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": conversation(1),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 3,
        **NO_THINKING,
    }
    async with httpx.AsyncClient(base_url=cached_engine, timeout=30) as http:
        for expected_hit in (False, True):
            usage = None
            async with http.stream("POST", CHAT, json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {") and '"usage":{' in line:
                        usage = httpx.Response(200, content=line[6:]).json()["usage"]
            assert usage is not None
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            assert (cached > 0) is expected_hit
        prompt = {"model": MODEL, "prompt": SYSTEM, "max_tokens": 2}
        first = (await http.post(COMPLETIONS, json=prompt)).json()["usage"]
        again = (await http.post(COMPLETIONS, json=prompt)).json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["prompt_tokens_details"]["cached_tokens"] > 0


@pytest.mark.anyio
async def test_without_a_cache_usage_has_no_details() -> None:
    async with running_server(create_app()) as url, sdk(url) as client:
        answer = await client.chat.completions.create(
            model=MODEL, messages=conversation(1), max_tokens=2, extra_body=NO_THINKING
        )
    assert answer.usage is not None and answer.usage.prompt_tokens_details is None


def test_cli_flags() -> None:
    args = parse_args(["--prefill-ms-per-token", "0.2", "--prefix-cache-blocks", "64"])
    assert (args.prefill_ms_per_token, args.prefix_cache_blocks, args.block_size) == (0.2, 64, 16)
    with pytest.raises(SystemExit):
        main(["--prefix-cache-blocks", "-1"])
