"""The reference engine's modes that break the seed contract: a per-batch seed and
batch-variant logits; and the batcher's gate that makes a batch's make-up certain."""

from __future__ import annotations

import anyio
import numpy as np
import numpy.typing as npt
import pytest

from refengine.batcher import Engine, Row
from refengine.cli import parse_args
from refengine.events import Finished
from refengine.model import default_model
from refengine.modes import (
    BATCH_VARIANCE,
    PER_BATCH,
    PER_ROW,
    UNPATCHED,
    batch_seeds,
    batch_variance,
)
from refengine.params import SamplingParams
from tests.support.runningengine import running

pytestmark = pytest.mark.anyio

SEEDED = SamplingParams(max_tokens=24, seed=1234, temperature=1.0)
GREEDY = SamplingParams(max_tokens=40, temperature=0.0)


async def _text(row: Row) -> str:
    parts: list[str] = []
    with anyio.fail_after(30):
        while not isinstance(event := await row.events.get(), Finished):
            parts.append(str(event))
    return "".join(parts)


async def _alone_then_behind(engine: Engine, params: SamplingParams, prompt: str) -> list[str]:
    """The request alone, then queued behind two others so they share its first step
    (seeded, so when each ends, and so the batch size at every step, is always the same:
    3, then 2 at the least, one reduction split)."""
    tokens = engine.tokenizer.encode(prompt)
    async with running(engine):
        alone = await _text(engine.submit(tokens, params))
        engine.pause()
        others = [
            engine.submit(
                engine.tokenizer.encode(f"topic {i}"), SamplingParams(max_tokens=60, seed=s)
            )
            for i, s in enumerate((11, 12))
        ]
        behind = engine.submit(tokens, params)
        engine.resume()
        texts = [alone, await _text(behind)]
        for row in others:
            await _text(row)
    return texts


def test_the_per_batch_stream_is_keyed_by_the_first_seeded_row() -> None:
    seeds, steps = batch_seeds([None, 5, 9], [7, 3, 0], fallback=-1)
    assert seeds == [5, 6, 7]  # row i draws position i of seed 5's stream
    assert steps == [3, 3, 3]  # at the key row's step
    assert batch_seeds([None, None], [1, 2], fallback=42) == ([42, 43], [0, 0])
    assert batch_seeds([2**63 - 1, None], [0, 0], fallback=0)[0] == [2**63 - 1, -(2**63)]


def test_batch_variance_depends_on_the_batch_size_in_powers_of_two() -> None:
    def varied(rows: int) -> npt.NDArray[np.float32]:
        logits = np.zeros((rows, 50), dtype=np.float32)
        batch_variance(logits)
        row: npt.NDArray[np.float32] = logits[0]
        return row

    assert np.array_equal(varied(2), varied(3))  # one split for 2-3 rows
    assert not np.array_equal(varied(1), varied(2))
    assert not np.array_equal(varied(3), varied(4))
    assert np.abs(varied(5)).max() <= BATCH_VARIANCE


async def test_a_per_batch_seed_replays_alone_but_not_behind_other_rows() -> None:
    engine = Engine(default_model(), seed_mode=PER_BATCH)
    alone, behind = await _alone_then_behind(engine, SEEDED, "Invent a name for a cat.")
    again = await _alone_then_behind(
        Engine(default_model(), seed_mode=PER_BATCH), SEEDED, "Invent a name for a cat."
    )
    assert again[0] == alone  # alone: the row's own seed at position 0
    assert behind != alone


async def test_the_per_row_sampler_replays_behind_other_rows() -> None:
    alone, behind = await _alone_then_behind(
        Engine(default_model()), SEEDED, "Invent a name for a cat."
    )
    assert behind == alone


async def test_batch_variant_logits_flip_a_near_tie_at_temperature_0() -> None:
    # "A list in Python is" has a top-two gap of 0.02 at its fourth greedy step.
    engine = Engine(default_model(), batch_variant_logits=True)
    alone, behind = await _alone_then_behind(engine, GREEDY, "A list in Python is")
    assert behind != alone
    plain = await _alone_then_behind(Engine(default_model()), GREEDY, "A list in Python is")
    assert plain[0] == plain[1]


async def test_gather_holds_the_batch_until_each_group_has_arrived() -> None:
    engine = Engine(default_model())
    long = SamplingParams(max_tokens=10, temperature=0.0)  # greedy: no end of text before 10
    async with running(engine):
        engine.gather(2, 1)
        first = engine.submit(engine.tokenizer.encode("a"), long)
        await engine.wait_until(lambda s: s.waiting == 1)
        assert engine.stats.steps == 0  # held: one of two has come
        second = engine.submit(engine.tokenizer.encode("b"), long)
        await engine.wait_until(lambda s: s.steps == 1 and s.active == 2)
        assert engine.stats.waiting == 0
        third = engine.submit(engine.tokenizer.encode("c"), long)
        for row in (first, second, third):
            await _text(row)
    # One step for the first group, then held until the third joined them.
    assert engine.stats.batch_sizes == {2: 1, 3: 9, 1: 1}


def test_gather_refuses_an_empty_group() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Engine(default_model()).gather(0)


@pytest.mark.parametrize(
    ("argv", "mode", "variant"),
    [
        ([], PER_ROW, False),
        (["--unpatched-sampler"], UNPATCHED, False),
        (["--per-batch-seed"], PER_BATCH, False),
        (["--batch-variant-logits"], PER_ROW, True),
        (["--per-batch-seed", "--batch-variant-logits"], PER_BATCH, True),
    ],
)
def test_each_mode_has_its_flag(argv: list[str], mode: str, variant: bool) -> None:
    args = parse_args(argv)
    assert (args.seed_mode, args.batch_variant_logits) == (mode, variant)


def test_the_seed_modes_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--unpatched-sampler", "--per-batch-seed"])
    assert "not allowed with" in capsys.readouterr().err


def test_unpatched_sampler_and_a_seed_mode_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclusive"):
        Engine(default_model(), unpatched_sampler=True, seed_mode=PER_BATCH)
