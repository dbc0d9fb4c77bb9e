"""A model of an engine's prefix cache and prefill cost, so routing can be measured
without GPUs.

What it models (vLLM's automatic prefix caching; SGLang's radix cache behaves
alike for this purpose): the KV cache is kept in blocks of ``block_size``
tokens. A block is named by a hash chained over every token before it, so a
block is reusable only by a prompt with exactly the same prefix up to its end.
A new prompt reuses its longest run of leading full blocks still in the cache
(``cached_tokens``, reported in ``usage.prompt_tokens_details``) and must
compute the rest: prefill, modelled as ``prefill_s_per_token`` seconds per
uncached token, one prefill at a time per engine (prefill is compute-bound
and a GPU runs one batch of it at once), while decode steps of running rows
go on. The prompt's blocks, and at the end the generated tokens' blocks too,
enter the cache; past ``capacity`` blocks the least recently used go.

What it leaves out: chunked prefill sharing a step budget with decode, the
memory a running row pins, and prefill's growth with context length.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class PrefixStats:
    """What the cache saw: prompt tokens asked for and those found cached."""

    prompts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    evicted_blocks: int = 0


class PrefixCache:
    """An LRU of token blocks keyed by their chained hash."""

    def __init__(self, *, block_size: int = 16, capacity: int = 4096) -> None:
        if block_size < 1 or capacity < 1:
            raise ValueError("block_size and capacity must be >= 1")
        self.block_size = block_size
        self.capacity = capacity
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def _hashes(self, tokens: Sequence[int]) -> list[int]:
        size = self.block_size
        out: list[int] = []
        parent = 0
        for start in range(0, len(tokens) - size + 1, size):
            parent = hash((parent, tuple(tokens[start : start + size])))
            out.append(parent)
        return out

    def match(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of ``tokens`` are cached (whole blocks); marks them used."""
        found = 0
        for block in self._hashes(tokens):
            if block not in self._blocks:
                break
            self._blocks.move_to_end(block)
            found += 1
        return found * self.block_size

    def insert(self, tokens: Sequence[int]) -> int:
        """Cache every full block of ``tokens``; the number of blocks evicted to make room."""
        blocks = self._blocks
        for block in self._hashes(tokens):
            blocks[block] = None
            blocks.move_to_end(block)
        evicted = 0
        while len(blocks) > self.capacity:
            blocks.popitem(last=False)
            evicted += 1
        return evicted


class Prefill:
    """The prefill step of each request: cache lookup, then the time of the uncached part."""

    def __init__(self, *, seconds_per_token: float = 0.0, cache: PrefixCache | None = None) -> None:
        if seconds_per_token < 0:
            raise ValueError("seconds_per_token must be >= 0")
        self.seconds_per_token = seconds_per_token
        self.cache = cache
        self.stats = PrefixStats()
        self._compute = asyncio.Lock()  # one prefill at a time

    async def run(self, prompt: Sequence[int]) -> int:
        """Prefill ``prompt``: returns its cached tokens, after the uncached ones' time."""
        # The last prompt token is always computed (the first output token needs its
        # logits), so only whole blocks before it can hit, as in vLLM.
        cached = self.cache.match(prompt[:-1]) if self.cache is not None else 0
        self.stats.prompts += 1
        self.stats.prompt_tokens += len(prompt)
        self.stats.cached_tokens += cached
        uncached = len(prompt) - cached
        if self.seconds_per_token and uncached:
            async with self._compute:
                await asyncio.sleep(uncached * self.seconds_per_token)
        self.keep(prompt)
        return cached

    def keep(self, tokens: Sequence[int]) -> None:
        """Cache ``tokens``' blocks (a prompt after prefill, or prompt + output at the end)."""
        if self.cache is not None:
            self.stats.evicted_blocks += self.cache.insert(tokens)
