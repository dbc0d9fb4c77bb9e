"""The reference engine's batcher: continuous batching, per-row seeds, thinking, cancel."""

from __future__ import annotations

import anyio
import pytest

from refengine.batcher import THINK_TOKENS, Engine, Row
from refengine.events import Finished
from refengine.model import default_model
from refengine.params import SamplingParams
from tests.support.runningengine import running

pytestmark = pytest.mark.anyio


def _engine(*, max_batch: int = 32, unpatched_sampler: bool = False) -> Engine:
    return Engine(default_model(), max_batch=max_batch, unpatched_sampler=unpatched_sampler)


def _prompt(engine: Engine, text: str) -> list[int]:
    return engine.tokenizer.encode(text)


async def _result(row: Row) -> tuple[str, str]:
    parts: list[str] = []
    with anyio.fail_after(30):
        while not isinstance(event := await row.events.get(), Finished):
            parts.append(str(event))
    return "".join(parts), event.reason


SEEDED = SamplingParams(max_tokens=40, seed=1234, temperature=1.0, top_k=200)


async def test_rows_queued_together_share_the_first_step() -> None:
    engine = _engine()
    rows = [engine.submit(_prompt(engine, f"list {i}"), SEEDED) for i in range(5)]
    async with running(engine):
        for row in rows:
            await _result(row)
    assert engine.stats.batch_sizes[5] >= 1
    assert engine.stats.max_batch_seen == 5
    assert engine.stats.finished == 5
    assert engine.stats.active == engine.stats.waiting == 0


async def test_a_request_joins_the_running_batch_at_a_step_boundary() -> None:
    engine = _engine()
    long = SamplingParams(max_tokens=200, seed=1)
    first = engine.submit(_prompt(engine, "a"), long)
    async with running(engine):
        await engine.wait_until(lambda s: s.steps >= 3)
        second = engine.submit(_prompt(engine, "b"), SamplingParams(max_tokens=3, seed=2))
        await _result(second)
        assert engine.stats.max_batch_seen == 2
        assert len(first.generated) > 3 or first.done
        engine.cancel(first)


async def test_max_batch_is_respected() -> None:
    engine = _engine(max_batch=2)
    rows = [engine.submit(_prompt(engine, "x"), SEEDED) for _ in range(5)]
    async with running(engine):
        for row in rows:
            await _result(row)
    assert engine.stats.max_batch_seen == 2
    assert engine.stats.admitted == engine.stats.finished == 5


async def test_a_seeded_row_gives_the_same_text_whatever_the_batch() -> None:
    engine = _engine()
    prompt = _prompt(engine, "Explain the list.")
    async with running(engine):
        alone = await _result(engine.submit(prompt, SEEDED))
        for crowd in (3, 8):
            others = [
                engine.submit(_prompt(engine, f"other {i}"), SamplingParams(max_tokens=5 + 7 * i))
                for i in range(crowd)
            ]
            again = await _result(engine.submit(prompt, SEEDED))
            assert again == alone
            for row in others:
                await _result(row)
    assert engine.stats.max_batch_seen > 3


async def test_unseeded_rows_get_distinct_random_seeds_at_admission() -> None:
    engine = _engine()
    rows = [engine.submit([], SamplingParams(max_tokens=2)) for _ in range(4)]
    assert all(row.seed is None for row in rows)
    async with running(engine):
        for row in rows:
            await _result(row)
    seeds = {row.seed for row in rows}
    assert None not in seeds
    assert len(seeds) == 4


async def test_the_unpatched_sampler_ignores_the_seed() -> None:
    engine = _engine(unpatched_sampler=True)
    # A prompt that stops mid-phrase: after a full stop the model often ends at
    # once, and three empty answers would look alike whatever the sampler did.
    prompt = _prompt(engine, "Explain the list of")
    async with running(engine):
        texts = {(await _result(engine.submit(prompt, SEEDED)))[0] for _ in range(3)}
    assert len(texts) > 1


async def test_thinking_writes_a_short_thought_first() -> None:
    engine = _engine()
    tok = engine.tokenizer
    row = engine.submit(_prompt(engine, "Hi"), SEEDED, thinking=True)
    async with running(engine):
        text, _ = await _result(row)
    assert row.generated[0] == tok.think_start_id
    assert row.generated[THINK_TOKENS + 1] == tok.think_end_id
    assert tok.eos_id not in row.generated[: THINK_TOKENS + 1]
    assert text.startswith("<think>\n")
    assert "\n</think>\n\n" in text


async def test_temperature_zero_is_deterministic_without_a_seed() -> None:
    engine = _engine()
    params = SamplingParams(max_tokens=20, temperature=0.0)
    async with running(engine):
        texts = {
            (await _result(engine.submit(_prompt(engine, "The"), params)))[0] for _ in range(3)
        }
    assert len(texts) == 1


async def test_cancel_drops_waiting_and_active_rows() -> None:
    engine = _engine()
    endless = SamplingParams(max_tokens=10**6, seed=3)
    active = engine.submit(_prompt(engine, "a"), endless, thinking=True)
    async with running(engine):
        await engine.wait_until(lambda s: s.steps >= 2)
        engine.pause()
        waiting = engine.submit(_prompt(engine, "b"), endless)
        engine.cancel(waiting)
        engine.cancel(active)
        engine.cancel(active)  # twice is harmless
        assert engine.stats.cancelled == 2
        assert engine.stats.active == engine.stats.waiting == 0
        tokens = engine.stats.tokens
        engine.resume()
        done = engine.submit(_prompt(engine, "c"), SamplingParams(max_tokens=1))
        await _result(done)
    assert engine.stats.tokens == tokens + 1  # only the new row was stepped
    assert engine.stats.finished == 1
    assert active.finish_reason == waiting.finish_reason == "cancelled"


async def test_a_scripted_row_shares_the_batch_and_keeps_its_limits() -> None:
    """A scripted row (structured outputs) takes a step like a sampled one: one piece
    a step, max_tokens and stop strings apply, and it ends with its script's reason."""
    engine = _engine()
    script = ("{", '"a', '":', " ", "1", "}")
    async with running(engine):
        engine.pause()
        scripted = engine.submit(
            _prompt(engine, "json"),
            SamplingParams(max_tokens=40),
            script=script,
            script_end="tool_calls",
        )
        sampled = engine.submit(_prompt(engine, "a list"), SEEDED)
        cut = engine.submit(_prompt(engine, "json"), SamplingParams(max_tokens=2), script=script)
        stopped = engine.submit(
            _prompt(engine, "json"), SamplingParams(max_tokens=40, stop=(":",)), script=script
        )
        engine.resume()
        results = [await _result(row) for row in (scripted, cut, stopped, sampled)]
    assert results[0] == ('{"a": 1}', "tool_calls")
    assert results[1] == ('{"a', "length")
    assert results[2] == ('{"a"', "stop")
    assert results[3][0]
    assert engine.stats.max_batch_seen == 4
    assert len(scripted.generated) == len(script)
    with pytest.raises(ValueError, match="at least one piece"):
        engine.submit([1], SamplingParams(max_tokens=1), script=())
