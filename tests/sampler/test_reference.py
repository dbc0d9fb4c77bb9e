"""The reference sampler: batch invariance, distributions, filters, seeds and steps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sampler.reference
from sampler import sample
from sampler.filters import min_p_mask, top_k_mask, top_p_mask

P_THRESHOLD = 1e-4


def _chi2_sf(x: float, df: int) -> float:
    """Survival function of the chi-square distribution (series for the lower gamma)."""
    a, z = df / 2.0, x / 2.0
    if z == 0:
        return 1.0
    term = total = 1.0 / a
    n = 0
    while term > total * 1e-15:
        n += 1
        term *= z / (a + n)
        total += term
    lower = math.exp(a * math.log(z) - z - math.lgamma(a)) * total
    return max(0.0, 1.0 - lower)


def _softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    e = np.exp(x - x.max())
    out: npt.NDArray[np.float64] = e / e.sum()
    return out


def _draws(logits: list[float], draws: int, *, seed: int = 20261113, **params: Any) -> list[int]:
    """One row's tokens over steps 0..draws-1 (as a batch of copies of the row)."""
    batch = np.tile(np.array(logits), (draws, 1))
    tokens = sample(batch, seeds=[seed] * draws, steps=np.arange(draws), **params)
    return [int(t) for t in tokens]


def _assert_fits(tokens: list[int], expected: npt.NDArray[np.float64]) -> None:
    counts = np.bincount(tokens, minlength=expected.size)
    support = expected > 0
    assert counts[~support].sum() == 0, "drew a token outside the support"
    exp_counts = expected[support] * len(tokens)
    stat = float(((counts[support] - exp_counts) ** 2 / exp_counts).sum())
    assert _chi2_sf(stat, int(support.sum()) - 1) > P_THRESHOLD


def test_chi2_helper_matches_known_quantiles() -> None:
    assert _chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-6)
    assert _chi2_sf(18.307038053275146, 10) == pytest.approx(0.05, rel=1e-6)


LOGITS = [2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0, 1.0, 0.25]
DRAWS = 20_000


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.6])
def test_draws_follow_the_softmax(temperature: float) -> None:
    expected = _softmax(np.array(LOGITS) / temperature)
    _assert_fits(_draws(LOGITS, DRAWS, temperature=temperature), expected)


def _filtered(keep: list[int], temperature: float) -> npt.NDArray[np.float64]:
    p = _softmax(np.array(LOGITS) / temperature)
    out = np.zeros_like(p)
    out[keep] = p[keep]
    result: npt.NDArray[np.float64] = out / out.sum()
    return result


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        # At T=1, p ranks ids 0, 1, then the tie 2 and 8, then 3, 9, 4, 5, 6, 7, with
        # cumulative mass 0.33, 0.53, 0.66, 0.78, 0.85, 0.91, ... and p / max(p) of
        # 1, 0.61, 0.37, 0.37 (id 8), 0.22 (id 3), 0.17 (id 9), ...
        ({"top_k": 3}, [0, 1, 2]),
        ({"top_k": 4}, [0, 1, 2, 8]),
        ({"top_p": 0.6}, [0, 1, 2]),
        ({"top_p": 0.5}, [0, 1]),
        ({"min_p": 0.3}, [0, 1, 2, 8]),
        ({"min_p": 0.2}, [0, 1, 2, 3, 8]),
        ({"top_k": 5, "top_p": 0.8}, [0, 1, 2, 8]),  # renormalised over 5: 0.77, 0.91
        ({"top_k": 6, "top_p": 0.7, "min_p": 0.2}, [0, 1, 2]),
        ({"top_k": 6, "top_p": 0.95, "min_p": 0.3}, [0, 1, 2, 8]),
        ({"top_k": 3, "temperature": 0.5}, [0, 1, 2]),
    ],
)
def test_filtered_draws_follow_the_renormalised_softmax(
    params: dict[str, Any], keep: list[int]
) -> None:
    expected = _filtered(keep, params.get("temperature", 1.0))
    _assert_fits(_draws(LOGITS, DRAWS, **params), expected)


def test_top_k_keeps_ties_at_the_lowest_ids() -> None:
    p = np.array([0.1, 0.3, 0.1, 0.3, 0.1, 0.1])
    assert np.flatnonzero(top_k_mask(p, 1)).tolist() == [1]
    assert np.flatnonzero(top_k_mask(p, 3)).tolist() == [0, 1, 3]
    assert np.flatnonzero(top_k_mask(p, 4)).tolist() == [0, 1, 2, 3]
    assert top_k_mask(p, 0).all()
    assert top_k_mask(p, 6).all()


def test_top_p_takes_the_shortest_prefix_and_at_least_one_token() -> None:
    p = np.array([0.1, 0.4, 0.1, 0.4])
    everything = np.ones(4, dtype=bool)
    assert np.flatnonzero(top_p_mask(p, 0.4, everything)).tolist() == [1]
    assert np.flatnonzero(top_p_mask(p, 0.41, everything)).tolist() == [1, 3]
    assert np.flatnonzero(top_p_mask(p, 0.85, everything)).tolist() == [0, 1, 3]
    assert np.flatnonzero(top_p_mask(p, 0.0, everything)).tolist() == [1]
    # Renormalised over what top-k kept: ids 1, 3 each hold half.
    kept = np.array([False, True, False, True])
    assert np.flatnonzero(top_p_mask(p, 0.5, kept)).tolist() == [1]
    assert np.flatnonzero(top_p_mask(p, 0.51, kept)).tolist() == [1, 3]


def test_top_p_on_a_long_flat_tail_matches_a_full_sort() -> None:
    rng = np.random.default_rng(3)
    p = _softmax(rng.normal(size=5000) * 0.3)
    order = np.argsort(-p, kind="stable")
    for top_p in (0.05, 0.5, 0.97, 0.9999):
        count = int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1
        mask = top_p_mask(p, top_p, np.ones(p.size, dtype=bool))
        assert sorted(np.flatnonzero(mask).tolist()) == sorted(order[:count].tolist())


def test_min_p_is_relative_to_the_top_token() -> None:
    p = np.array([[0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25]])
    assert min_p_mask(p, np.array([0.5, 1.0])).tolist() == [
        [True, True, False, False],
        [True, True, True, True],
    ]


def test_temperature_zero_is_greedy_with_ties_to_the_lowest_id() -> None:
    logits = np.array([[0.0, 3.0, 1.0, 3.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -2.0, -0.5, -7.0]])
    for step in range(5):
        tokens = sample(logits, seeds=[1, 2, 3], steps=[step] * 3, temperature=0.0, top_k=3)
        assert tokens.tolist() == [1, 0, 2]


def test_mixed_greedy_and_sampled_rows() -> None:
    logits = np.zeros((2, 50))
    logits[:, 7] = 0.1
    tokens = {
        int(sample(logits, seeds=[s, s], steps=[0, 0], temperature=[0.0, 1.0])[0])
        for s in range(20)
    }
    assert tokens == {7}


def test_replay_is_identical_and_steps_and_seeds_change_the_draw() -> None:
    logits = np.zeros((1, 1000))
    first = [int(sample(logits, seeds=[99], steps=[s])[0]) for s in range(50)]
    again = [int(sample(logits, seeds=[99], steps=[s])[0]) for s in range(50)]
    assert first == again
    assert len(set(first)) > 40  # a flat distribution over 1000 tokens barely repeats
    by_seed = sample(np.zeros((64, 1000)), seeds=np.arange(64), steps=np.zeros(64, dtype=np.int64))
    assert len(set(by_seed.tolist())) > 55


@pytest.mark.parametrize("seed", [-(2**63), -(2**62), -1, 0, 1, 2**63 - 1])
def test_seeds_at_the_int64_limits(seed: int) -> None:
    logits = np.zeros((3, 500))
    tokens = sample(logits, seeds=[seed] * 3, steps=[0, 1, 2**40])
    assert tokens.dtype == np.int64
    assert tokens.tolist() == sample(logits, seeds=[seed] * 3, steps=[0, 1, 2**40]).tolist()


def test_neighbouring_seeds_near_the_limits_differ() -> None:
    logits = np.zeros((4, 10_000))
    tokens = sample(logits, seeds=[-(2**63), 2**63 - 1, -1, 0], steps=[0] * 4)
    assert len(set(tokens.tolist())) == 4


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"seeds": [2**63], "steps": [0]}, ValueError),
        ({"seeds": [0], "steps": [-1]}, ValueError),
        ({"seeds": [0, 1], "steps": [0]}, ValueError),
        ({"seeds": [0], "steps": [0], "temperature": -0.5}, ValueError),
        ({"seeds": [0], "steps": [0], "temperature": float("nan")}, ValueError),
        ({"seeds": [0], "steps": [0], "top_p": 1.5}, ValueError),
        ({"seeds": [0], "steps": [0], "min_p": -0.1}, ValueError),
        ({"seeds": [0.5], "steps": [0]}, TypeError),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        sample(np.zeros((1, 4)), **kwargs)


def test_bad_logits_are_rejected() -> None:
    with pytest.raises(ValueError):
        sample(np.zeros(4), seeds=[0], steps=[0])
    with pytest.raises(TypeError):
        sample(np.zeros((1, 4), dtype=np.int64), seeds=[0], steps=[0])


def test_plain_python_sequences_and_scalars_are_accepted() -> None:
    logits = [[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]
    listed = sample(logits, seeds=[5, 6], steps=[1, 2], temperature=[0.9, 0.9], top_k=[2, 2])
    scalar = sample(np.array(logits), seeds=[5, 6], steps=[1, 2], temperature=0.9, top_k=2)
    assert listed.tolist() == scalar.tolist()


def test_float32_logits_agree_with_float64_except_near_ties() -> None:
    rng = np.random.default_rng(11)
    rows, vocab = 400, 2000
    logits = rng.normal(size=(rows, vocab)) * 2.0
    params: dict[str, Any] = {
        "seeds": rng.integers(-(2**63), 2**63 - 1, size=rows, dtype=np.int64),
        "steps": rng.integers(0, 1000, size=rows),
        "temperature": 0.8,
        "top_p": 0.95,
    }
    wide = sample(logits, **params)
    narrow = sample(logits.astype(np.float32), **params)
    assert np.mean(wide == narrow) >= 0.99


@pytest.mark.parametrize("share", [0.0, 2.0])
def test_sparse_and_dense_noise_paths_agree(monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(16, 300))
    params: dict[str, Any] = {
        "seeds": rng.integers(-(2**63), 2**63 - 1, size=16, dtype=np.int64),
        "steps": np.arange(16),
        "temperature": rng.uniform(0.0, 2.0, size=16),
        "top_k": rng.integers(0, 300, size=16),
        "top_p": rng.uniform(0.2, 1.0, size=16),
        "min_p": rng.uniform(0.0, 0.2, size=16),
    }
    reference = sample(logits, **params)
    monkeypatch.setattr(sampler.reference, "_SPARSE_SHARE", share)
    assert sample(logits, **params).tolist() == reference.tolist()


ROW = st.fixed_dictionaries(
    {
        "seed": st.integers(-(2**63), 2**63 - 1),
        "step": st.integers(0, 2**63 - 1),
        "logit_seed": st.integers(0, 2**32 - 1),
        "temperature": st.sampled_from([0.0, 0.3, 1.0, 1.7]),
        "top_k": st.integers(-1, 40),
        "top_p": st.sampled_from([0.0, 0.3, 0.9, 1.0]),
        "min_p": st.sampled_from([0.0, 0.05, 0.5]),
    }
)
VOCAB = 37


def _batch(rows: list[dict[str, Any]]) -> npt.NDArray[np.int64]:
    logits = np.stack([np.random.default_rng(r["logit_seed"]).normal(size=VOCAB) * 2 for r in rows])
    return sample(
        logits,
        seeds=[r["seed"] for r in rows],
        steps=[r["step"] for r in rows],
        temperature=[r["temperature"] for r in rows],
        top_k=[r["top_k"] for r in rows],
        top_p=[r["top_p"] for r in rows],
        min_p=[r["min_p"] for r in rows],
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(ROW, min_size=1, max_size=8),
    others=st.lists(ROW, max_size=6),
    data=st.data(),
)
def test_a_rows_token_ignores_its_batch(
    rows: list[dict[str, Any]], others: list[dict[str, Any]], data: st.DataObject
) -> None:
    alone = [int(_batch([r])[0]) for r in rows]
    assert _batch(rows).tolist() == alone
    # Permuted, shrunk, grown with strangers, and with new neighbours: the same tokens.
    order = data.draw(st.permutations(range(len(rows))))
    assert _batch([rows[i] for i in order]).tolist() == [alone[i] for i in order]
    keep = data.draw(st.lists(st.sampled_from(range(len(rows))), min_size=1, unique=True))
    mixed = [rows[i] for i in keep] + others
    assert _batch(mixed).tolist()[: len(keep)] == [alone[i] for i in keep]
    assert _batch(others + rows).tolist()[len(others) :] == alone
