"""The Triton sampler on a CUDA GPU at full size (run by scripts/gpu-test on the device).

Bit-exact stream, token agreement with the float64 CPU reference (near-ties counted and
printed), batch invariance for B up to 512 and V up to 262,144, filters, T = 0, bfloat16.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import sampler
from sampler.filters import min_p_mask, top_k_mask, top_p_mask
from sampler.stream import gumbel, token_bits

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from sampler import triton_sampler as ts  # noqa: E402

pytestmark = pytest.mark.gpu

NEAR_TIE = 1e-4  # |score gap| under which float32 and float64 may pick different tokens
QWEN_VOCAB = 151_936


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _logits(rows: int, vocab: int, seed: int) -> npt.NDArray[np.float32]:
    rng = _rng(seed)
    x = rng.normal(size=(rows, vocab)) * 2.0
    # A few peaked rows, as language models give.
    x[::3, rng.integers(0, vocab, size=8)] += 12.0
    out: npt.NDArray[np.float32] = x.astype(np.float32)
    return out


def _ref_scores(
    x: npt.NDArray[np.float64], seed: int, step: int, tokens: list[int], params: dict[str, Any]
) -> list[float]:
    """The reference's score (s + g, -inf when filtered out) of some tokens of one row."""
    temp = float(params.get("temperature", 1.0))
    s = x / temp
    p = np.exp(s - s.max())
    p /= p.sum()
    keep = top_k_mask(p, int(params.get("top_k", 0)))
    keep &= top_p_mask(p, float(params.get("top_p", 1.0)), keep)
    keep &= min_p_mask(p[None, :], np.array([float(params.get("min_p", 0.0))]))[0]
    bits = token_bits([seed] * len(tokens), [step] * len(tokens), tokens)
    g = gumbel(bits)
    return [float(s[t] + g[i]) if keep[t] else float("-inf") for i, t in enumerate(tokens)]


def _compare(
    logits: npt.NDArray[np.float64], got: list[int], params: dict[str, Any], seeds: Any, steps: Any
) -> tuple[int, int, float]:
    """(mismatches, near-ties among them, largest near-tie gap) against sampler.sample."""
    expected = sampler.sample(logits, seeds=seeds, steps=steps, **params).tolist()
    mismatches = near = 0
    worst = 0.0
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if e == g:
            continue
        mismatches += 1
        se, sg = _ref_scores(logits[i], int(seeds[i]), int(steps[i]), [e, g], params)
        gap = se - sg
        if gap <= NEAR_TIE:
            near += 1
            worst = max(worst, gap)
    return mismatches, near, worst


@pytest.mark.parametrize("vocab", [5, 4099, QWEN_VOCAB, 262_144])
def test_stream_bits_are_bit_exact(vocab: int) -> None:
    seeds = [0, -1, 1234, 2**63 - 1, -(2**63), 0x5DEECE66D]
    steps = [0, 2**32 + 7, 5, 2**63 - 1, 1, 2**31]
    got = ts.stream_bits(
        torch.tensor(seeds, device="cuda"), torch.tensor(steps, device="cuda"), vocab
    )
    assert np.array_equal(got.cpu().numpy(), sampler.batch_bits(seeds, steps, vocab))


FILTERS: list[dict[str, Any]] = [
    {"temperature": 1.0},
    {"temperature": 0.7},
    {"temperature": 0.0},
    {"temperature": 0.8, "top_k": 50},
    {"temperature": 0.8, "top_k": 50, "top_p": 0.9},
    {"temperature": 1.0, "top_k": 1},
    {"temperature": 1.0, "top_k": 1000, "top_p": 0.95},
    {"temperature": 0.9, "top_p": 0.9},
    {"temperature": 1.0, "min_p": 0.05},
    {"temperature": 0.6, "top_k": 20, "top_p": 0.8, "min_p": 0.1},
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("params", FILTERS, ids=[str(p) for p in FILTERS])
def test_tokens_agree_with_the_float64_reference(
    params: dict[str, Any], dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = 96 if dtype == "float32" else 32
    x = torch.from_numpy(_logits(rows, QWEN_VOCAB, seed=len(str(params)))).to(getattr(torch, dtype))
    rng = _rng(1)
    seeds = rng.integers(-(2**63), 2**63 - 1, size=rows, dtype=np.int64)
    steps = rng.integers(0, 2**40, size=rows, dtype=np.int64)
    got = ts.sample(
        x.cuda(),
        seeds=torch.from_numpy(seeds).cuda(),
        steps=torch.from_numpy(steps).cuda(),
        **params,
    ).tolist()
    assert all(0 <= t < QWEN_VOCAB for t in got)
    ref_logits = x.float().numpy().astype(np.float64)
    mismatches, near, worst = _compare(ref_logits, got, params, seeds, steps)
    with capsys.disabled():
        print(
            f"\n[near-ties] {dtype} {params}: {rows} rows, {mismatches} differ from the "
            f"float64 reference, {near} of them near-ties (largest gap {worst:.2e})"
        )
    assert mismatches == near


def test_greedy_ties_go_to_the_lowest_id() -> None:
    x = torch.zeros((4, QWEN_VOCAB), device="cuda")
    x[:, [7, 90_000, 151_935]] = 3.0
    x[1, 5] = 3.0
    got = ts.sample(x, seeds=0, steps=0, temperature=0.0).tolist()
    assert got == [7, 5, 7, 7]


PROBES: list[dict[str, Any]] = [
    {"temperature": 1.0},
    {"temperature": 0.0},
    {"temperature": 0.7, "top_k": 50, "top_p": 0.9},
    {"temperature": 1.0, "top_p": 0.8},
    {"temperature": 1.2, "min_p": 0.1},
    {"temperature": 0.9, "top_k": 500},
]


def _batch(
    rows: list[int], logits: Any, params: list[dict[str, Any]], seeds: Any, steps: Any
) -> Any:
    def col(name: str, default: float, dtype: Any) -> Any:
        return torch.tensor(
            [params[r].get(name, default) for r in rows], dtype=dtype, device="cuda"
        )

    return ts.sample(
        logits[rows],
        seeds=seeds[rows],
        steps=steps[rows],
        temperature=col("temperature", 1.0, torch.float32),
        top_k=col("top_k", 0, torch.int64),
        top_p=col("top_p", 1.0, torch.float32),
        min_p=col("min_p", 0.0, torch.float32),
    )


@pytest.mark.parametrize("vocab", [1000, QWEN_VOCAB, 262_144])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_row_draws_the_same_in_any_batch(vocab: int, dtype: str) -> None:
    pool = 512
    rng = _rng(vocab)
    logits = torch.from_numpy(_logits(pool, vocab, seed=vocab)).to(getattr(torch, dtype)).cuda()
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=pool, dtype=np.int64)).cuda()
    steps = torch.from_numpy(rng.integers(0, 10_000, size=pool, dtype=np.int64)).cuda()
    params = [PROBES[int(i)] for i in rng.integers(0, len(PROBES), size=pool)]
    probes = list(range(len(PROBES)))
    for i in probes:
        params[i] = PROBES[i]
    alone = [int(_batch([i], logits, params, seeds, steps)[0]) for i in probes]
    for size in (1, 2, 7, 64, 257, 512):
        for trial in range(2):
            rows = [int(r) for r in rng.permutation(pool)[:size]]
            for i in probes[: min(size, len(probes))]:
                if i not in rows:
                    rows[int(rng.integers(0, size))] = i
            got = _batch(rows, logits, params, seeds, steps).tolist()
            for pos, r in enumerate(rows):
                if r in probes:
                    assert got[pos] == alone[r], (size, trial, r, pos)
    everyone = _batch(list(range(pool)), logits, params, seeds, steps).tolist()
    order = [int(r) for r in rng.permutation(pool)]
    shuffled = _batch(order, logits, params, seeds, steps).tolist()
    assert shuffled == [everyone[r] for r in order]
    assert everyone[: len(probes)] == alone


def test_sample_replays_inside_a_cuda_graph() -> None:
    # No host sync and no data-dependent shape: one call captures, and replays draw what
    # eager calls draw, after the inputs change in place (a new step, new logits).
    rows = 64
    rng = _rng(99)
    x = torch.from_numpy(_logits(rows, QWEN_VOCAB, seed=99)).cuda()
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=rows, dtype=np.int64)).cuda()
    steps = torch.from_numpy(rng.integers(0, 10_000, size=rows, dtype=np.int64)).cuda()
    params = [PROBES[i % len(PROBES)] for i in range(rows)]
    temps = torch.tensor([p.get("temperature", 1.0) for p in params], device="cuda")
    top_k = torch.tensor([p.get("top_k", 0) for p in params], device="cuda")
    top_p = torch.tensor([p.get("top_p", 1.0) for p in params], device="cuda")
    min_p = torch.tensor([p.get("min_p", 0.0) for p in params], device="cuda")

    def call(logits: Any) -> Any:
        return ts.sample(
            logits,
            seeds=seeds,
            steps=steps,
            temperature=temps,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
        )

    static_x = x.clone()
    call(static_x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call(static_x)
    for trial in range(3):
        fresh = x if trial == 0 else x[torch.randperm(rows, device="cuda")]
        static_x.copy_(fresh)
        graph.replay()
        assert out.tolist() == call(fresh).tolist(), trial
        steps += 1
