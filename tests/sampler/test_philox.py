"""Philox4x32-10 against Random123's known answers, and the per-row stream's counter layout."""

from __future__ import annotations

import numpy as np
import pytest

from sampler import batch_bits, random_seed, row_bits
from sampler.philox import philox4x32_10
from sampler.stream import gumbel, token_bits, uniform

# Random123 kat_vectors, the three "philox4x32 10" lines: counter, key, expected output.
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    (
        [0xFFFFFFFF] * 4,
        [0xFFFFFFFF] * 2,
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD],
    ),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_known_answers(counter: list[int], key: list[int], expected: list[int]) -> None:
    out = philox4x32_10(np.array(counter, dtype=np.uint32), np.array(key, dtype=np.uint32))
    assert out.dtype == np.uint32
    assert out.tolist() == expected


def test_known_answers_batched_and_broadcast() -> None:
    counters = np.array([c for c, _, _ in KAT], dtype=np.uint32)
    keys = np.array([k for _, k, _ in KAT], dtype=np.uint32)
    assert philox4x32_10(counters, keys).tolist() == [e for _, _, e in KAT]
    # One key broadcast over many counters gives what each call alone gives.
    many = np.arange(40, dtype=np.uint32).reshape(10, 4)
    together = philox4x32_10(many, keys[2])
    for row, counter in zip(together, many, strict=True):
        assert row.tolist() == philox4x32_10(counter, keys[2]).tolist()


@pytest.mark.parametrize(
    ("counter", "key", "error"),
    [
        ([0, 0, 0], [0, 0], ValueError),
        ([0, 0, 0, 0], [0], ValueError),
        ([0, 0, 0, -1], [0, 0], ValueError),
        ([0, 0, 0, 2**32], [0, 0], ValueError),
        ([0.0, 0, 0, 0], [0, 0], TypeError),
    ],
)
def test_bad_words_are_rejected(counter: list[float], key: list[int], error: type) -> None:
    with pytest.raises(error):
        philox4x32_10(np.array(counter), np.array(key))


def test_row_bits_counter_layout() -> None:
    """Token t is word t % 4 of philox((t // 4, step lo, step hi, stream), (seed lo, seed hi))."""
    seed, step, stream, vocab = -2, 2**32 * 3 + 7, 5, 11
    bits = row_bits(seed, step, vocab, stream=stream)
    key = np.array([0xFFFFFFFE, 0xFFFFFFFF], dtype=np.uint32)  # -2 as uint64, lo then hi
    for t in range(vocab):
        counter = np.array([t // 4, 7, 3, stream], dtype=np.uint32)
        assert bits[t] == philox4x32_10(counter, key)[t % 4]
    assert bits.shape == (vocab,)
    assert bits.dtype == np.uint32


def test_seed_key_words_are_twos_complement() -> None:
    assert row_bits(-1, 0, 4).tolist() == philox4x32_10([0, 0, 0, 0], [2**32 - 1] * 2).tolist()
    assert row_bits(0, 0, 4).tolist() == KAT[0][2]
    seed = 0x299F31D0 << 32 | 0xA4093822  # key word 1 is the high half
    assert row_bits(seed, 0, 1)[0] == philox4x32_10([0, 0, 0, 0], KAT[2][1])[0]


# Pinned values of the stream contract, for anyone reimplementing it (the GPU kernel).
GOLDEN = [
    ((1234, 0, 6, 0), [0x2090B348, 0xDA7CF0AB, 0x4401906F, 0xCBCA470E, 0x9EEEDE35, 0x1CBE137C]),
    (
        (-1, 2**32 + 7, 6, 3),
        [0xCFFACE07, 0x72D79D2F, 0x660FE010, 0x69C821ED, 0x707B4F23, 0x8822BEFC],
    ),
    ((-(2**63), 2**63 - 1, 5, 0), [0x3082C3B5, 0x71DE03E1, 0xC31880EF, 0xB4878A03, 0xBC4CF091]),
]


@pytest.mark.parametrize(("args", "expected"), GOLDEN)
def test_golden_stream_values(args: tuple[int, int, int, int], expected: list[int]) -> None:
    seed, step, vocab, stream = args
    assert row_bits(seed, step, vocab, stream=stream).tolist() == expected


def test_batch_and_sparse_views_agree_with_row_bits() -> None:
    seeds = [0, -1, 2**63 - 1, -(2**63), 42]
    steps = [0, 1, 2**32, 2**63 - 1, 99]
    vocab = 13
    batch = batch_bits(seeds, steps, vocab)
    for i, (seed, step) in enumerate(zip(seeds, steps, strict=True)):
        assert batch[i].tolist() == row_bits(seed, step, vocab).tolist()
    rows, tokens = np.meshgrid(np.arange(len(seeds)), np.arange(vocab), indexing="ij")
    sparse = token_bits(
        np.array(seeds)[rows.ravel()], np.array(steps)[rows.ravel()], tokens.ravel()
    )
    assert sparse.reshape(len(seeds), vocab).tolist() == batch.tolist()


def test_streams_are_independent() -> None:
    assert row_bits(7, 3, 64, stream=0).tolist() != row_bits(7, 3, 64, stream=1).tolist()


@pytest.mark.parametrize(
    ("seeds", "steps", "vocab", "stream"),
    [
        ([2**63], [0], 4, 0),
        ([-(2**63) - 1], [0], 4, 0),
        ([0], [-1], 4, 0),
        ([0], [2**63], 4, 0),
        ([0, 1], [0], 4, 0),
        ([0], [0], -1, 0),
        ([0], [0], 4, 2**32),
    ],
)
def test_out_of_range_inputs_are_rejected(
    seeds: list[int], steps: list[int], vocab: int, stream: int
) -> None:
    with pytest.raises(ValueError):
        batch_bits(seeds, steps, vocab, stream=stream)


def test_uniform_and_gumbel_stay_finite_at_the_ends() -> None:
    extremes = np.array([0, 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=np.uint32)
    u = uniform(extremes)
    assert np.all((u > 0) & (u < 1))
    assert u[0] == 0.5 * 2.0**-32
    assert np.all(np.isfinite(gumbel(extremes)))


def test_random_seed_is_a_signed_64_bit_integer() -> None:
    seeds = {random_seed() for _ in range(64)}
    assert all(-(2**63) <= s < 2**63 for s in seeds)
    assert len(seeds) == 64
    assert any(s < 0 for s in seeds)
