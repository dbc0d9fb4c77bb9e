"""The structured draws: the row's Philox stream on its own stream id, in order."""

from __future__ import annotations

import pytest

from sampler.draws import BLOCK, STRUCTURED_STREAM, Draws
from sampler.stream import row_bits


def test_draw_k_is_the_stream_word_of_its_block_and_position() -> None:
    draws = Draws(-5)
    words = [draws.word() for _ in range(BLOCK + 3)]
    assert words[:BLOCK] == row_bits(-5, 0, BLOCK, stream=STRUCTURED_STREAM).tolist()
    assert words[BLOCK:] == row_bits(-5, 1, BLOCK, stream=STRUCTURED_STREAM)[:3].tolist()
    assert words[:8] != row_bits(-5, 0, 8).tolist()  # not the sampling stream's noise


def test_the_same_seed_gives_the_same_draws() -> None:
    a, b = Draws(42), Draws(42)
    assert [a.below(10**30) for _ in range(5)] == [b.below(10**30) for _ in range(5)]
    assert a.count == 20  # 100-bit range: four words a draw


@pytest.mark.parametrize("n", [1, 2, 3, 7, 2**32, 2**32 + 1, 2**70])
def test_below_stays_in_range(n: int) -> None:
    draws = Draws(1)
    values = [draws.below(n) for _ in range(300)]
    assert all(0 <= v < n for v in values)
    if n > 1:
        assert len(set(values)) > 1


def test_integer_chance_uniform() -> None:
    draws = Draws(3)
    assert {draws.integer(-2, 2) for _ in range(200)} == {-2, -1, 0, 1, 2}
    assert 0.4 < sum(draws.chance(0.5) for _ in range(1000)) / 1000 < 0.6
    assert all(0 < draws.uniform() < 1 for _ in range(100))
    with pytest.raises(ValueError):
        draws.below(0)
    with pytest.raises(ValueError):
        draws.integer(3, 2)
