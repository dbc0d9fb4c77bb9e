"""The Triton sampler against the CPU reference, on small shapes.

Without a GPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, torch CPU
tensors), so CI checks the kernels' logic; with one they run compiled. Skipped when
torch or triton is not installed (the ``[gpu]`` extra). The full-size GPU suite is
tests/sampler/gpu/ (``scripts/gpu-test``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import sampler

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    # Must be set before the kernels are decorated, i.e. before triton_sampler is imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from sampler import triton_sampler as ts  # noqa: E402
from tests.support.tritoninterp import skip_repatching, untraced_language  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Small launch constants so the interpreter stays quick; the code paths are the same.
# lanes=256 (not 128): the exact fallback's ~40 passes over a row of VOCAB=300 take two
# steps each instead of three, and two still make a full step and a masked tail, the
# loop's carried state between them: the claim each fallback test checks holds as before.
SMALL = ts.KernelConfig(
    slice_size=256,
    groups=32,
    group_width=16,
    group_cap=32,
    group_chunk=8,
    lanes=256,
    cap=64,
    k_fast=16,
)
# The same, with every filtered row on the exact fallback (no top-k candidate path).
SMALL_FALLBACK = ts.KernelConfig(
    slice_size=256, groups=32, group_width=16, group_cap=32, lanes=256, cap=64, k_fast=0
)
VOCAB = 300

SEEDS = [0, -1, 1234, 2**63 - 1, -(2**63), 987654321987]
STEPS = [0, 2**32 + 7, 5, 2**63 - 1, 1, 77]


@pytest.fixture(autouse=True)
def _interpreter_patches_once_per_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    # A third of the interpreter's time went to patching triton.language again at each
    # device function call (tests/support/tritoninterp.py says why skipping it is safe).
    # Under coverage, triton's and numpy's own lines ran untraced (the same file says why).
    if not torch.cuda.is_available():
        skip_repatching(monkeypatch)
        untraced_language(monkeypatch)


def _tensor(values: Any, dtype: Any) -> Any:
    return torch.tensor(values, dtype=dtype, device=DEVICE)


def _logits(rows: int, vocab: int, seed: int) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    out: npt.NDArray[np.float32] = (rng.normal(size=(rows, vocab)) * 2.5).astype(np.float32)
    return out


def _gpu_sample(
    logits: npt.NDArray[np.float32], config: Any = SMALL, **params: Any
) -> npt.NDArray[np.int64]:
    rows = logits.shape[0]
    tokens = ts.sample(
        torch.from_numpy(logits).to(DEVICE),
        seeds=_tensor(SEEDS[:rows], torch.int64),
        steps=_tensor(STEPS[:rows], torch.int64),
        config=config,
        **params,
    )
    assert tokens.dtype == torch.int64
    out: npt.NDArray[np.int64] = tokens.cpu().numpy()
    return out


@pytest.mark.parametrize("vocab", [1, 13, 2048, 2051])
@pytest.mark.parametrize("stream", [0, 3])
def test_stream_bits_equal_the_cpu_reference(vocab: int, stream: int) -> None:
    got = ts.stream_bits(
        _tensor(SEEDS, torch.int64), _tensor(STEPS, torch.int64), vocab, stream=stream
    )
    expected = sampler.batch_bits(SEEDS, STEPS, vocab, stream=stream)
    assert np.array_equal(got.cpu().numpy(), expected.astype(np.int64))


FILTERS: list[dict[str, Any]] = [
    {},
    {"temperature": 0.7},
    {"temperature": 0.0},
    {"top_k": 5},
    {"top_k": 16, "temperature": 1.5},
    {"top_k": 40},  # beyond k_fast: the bitwise search
    {"top_p": 0.9},
    {"top_p": 0.0},
    {"top_k": 10, "top_p": 0.6},
    {"min_p": 0.2},
    {"min_p": 1.0},
    {"top_k": 8, "top_p": 0.8, "min_p": 0.3, "temperature": 0.5},
    {"top_k": 40, "top_p": 0.7, "min_p": 0.05},
]


@pytest.mark.parametrize("params", FILTERS, ids=[str(p) for p in FILTERS])
def test_tokens_equal_the_cpu_reference(params: dict[str, Any]) -> None:
    logits = _logits(len(SEEDS), VOCAB, seed=7)
    expected = sampler.sample(logits, seeds=SEEDS, steps=STEPS, **params)
    assert _gpu_sample(logits, **params).tolist() == expected.tolist()


@pytest.mark.parametrize(
    "params", [{"temperature": 0.0}, {"top_k": 3}, {"top_k": 7, "top_p": 0.5}, {"top_p": 0.3}]
)
def test_exact_ties_go_to_the_lowest_id(params: dict[str, Any]) -> None:
    # Logits on a coarse grid: many exact ties, also at the top_k boundary, so that the
    # candidates overflow the fast path and the bitwise search decides.
    rng = np.random.default_rng(3)
    logits = rng.integers(0, 4, size=(len(SEEDS), VOCAB)).astype(np.float32)
    expected = sampler.sample(logits, seeds=SEEDS, steps=STEPS, **params)
    assert _gpu_sample(logits, **params).tolist() == expected.tolist()


@pytest.mark.parametrize(
    "params", [{"top_k": 15}, {"top_k": 12, "top_p": 0.7}, {"top_k": 16, "min_p": 0.5}]
)
def test_ties_at_the_top_k_boundary_on_the_candidate_path(params: dict[str, Any]) -> None:
    # Few candidates (so the top-k candidate path takes them), with exact ties across the
    # k-th place: top_k keeps the lowest ids among the tied logits.
    rng = np.random.default_rng(13)
    logits = (rng.normal(size=(len(SEEDS), VOCAB)) * 0.1 - 5.0).astype(np.float32)
    for row in logits:
        spots = rng.permutation(VOCAB)[:20]
        row[spots[:10]] = 3.0
        row[spots[10:]] = 2.0
    expected = sampler.sample(logits, seeds=SEEDS, steps=STEPS, **params)
    assert _gpu_sample(logits, **params).tolist() == expected.tolist()
    assert _gpu_sample(logits, SMALL_FALLBACK, **params).tolist() == expected.tolist()


CANDIDATE_PATH = [p for p in FILTERS if 0 < p.get("top_k", 0) <= SMALL.k_fast]


@pytest.mark.parametrize("params", CANDIDATE_PATH, ids=[str(p) for p in CANDIDATE_PATH])
def test_candidate_path_and_exact_fallback_agree(params: dict[str, Any]) -> None:
    logits = _logits(len(SEEDS), VOCAB, seed=21)
    fast = _gpu_sample(logits, **params)
    assert _gpu_sample(logits, SMALL_FALLBACK, **params).tolist() == fast.tolist()


def test_scalar_and_tensor_parameters_draw_the_same() -> None:
    # A Python scalar travels as a kernel argument (a float as its float64 bits); a tensor
    # is read in place, whatever its dtype; a 0-d tensor is broadcast.
    logits = _logits(len(SEEDS), VOCAB, seed=17)
    rows = len(SEEDS)
    scalars: dict[str, Any] = {"temperature": 0.7, "top_k": 9, "top_p": 0.8, "min_p": 0.05}
    expected = sampler.sample(logits, seeds=SEEDS, steps=STEPS, **scalars).tolist()
    assert _gpu_sample(logits, **scalars).tolist() == expected
    full = {
        "temperature": _tensor([0.7] * rows, torch.float64),
        "top_k": _tensor([9] * rows, torch.int32),
        "top_p": _tensor([0.8] * rows, torch.float64),
        "min_p": _tensor([0.05] * rows, torch.float64),
    }
    assert _gpu_sample(logits, **full).tolist() == expected
    zero_d = {
        "temperature": _tensor(0.7, torch.float64),
        "top_k": _tensor(9, torch.int64),
        "top_p": _tensor(0.8, torch.float64),
        "min_p": _tensor(0.05, torch.float64),
    }
    assert _gpu_sample(logits, **zero_d).tolist() == expected
    one = ts.sample(
        torch.from_numpy(logits[:1]).to(DEVICE),
        seeds=SEEDS[0],
        steps=STEPS[0],
        config=SMALL,
        **scalars,
    )
    assert one.tolist() == expected[:1]


def test_per_row_parameters_mix_paths_in_one_batch() -> None:
    logits = _logits(len(SEEDS), VOCAB, seed=11)
    params: dict[str, Any] = {
        "temperature": [1.0, 0.0, 0.8, 1.2, 1.0, 0.6],
        "top_k": [0, 5, 12, 0, 40, 0],
        "top_p": [1.0, 0.9, 0.7, 0.95, 1.0, 1.0],
        "min_p": [0.0, 0.0, 0.1, 0.0, 0.0, 0.3],
    }
    expected = sampler.sample(logits, seeds=SEEDS, steps=STEPS, **params)
    dtypes = {"temperature": torch.float32, "top_k": torch.int32}
    tensors = {name: _tensor(v, dtypes.get(name, torch.float64)) for name, v in params.items()}
    assert _gpu_sample(logits, **tensors).tolist() == expected.tolist()


def test_a_row_draws_the_same_alone_and_in_any_batch() -> None:
    logits = _logits(6, VOCAB, seed=5)
    params: dict[str, Any] = {"top_k": [0, 5, 0, 12, 40, 0], "top_p": [1, 1, 0.8, 0.9, 1, 1]}
    together = _gpu_sample(logits, **params)
    order = [4, 0, 5, 2, 1, 3]
    rows = len(order)
    shuffled = ts.sample(
        torch.from_numpy(logits[order]).to(DEVICE),
        seeds=_tensor([SEEDS[i] for i in order], torch.int64),
        steps=_tensor([STEPS[i] for i in order], torch.int64),
        top_k=_tensor([params["top_k"][i] for i in order], torch.int64),
        top_p=_tensor([params["top_p"][i] for i in order], torch.float64),
        config=SMALL,
    )
    assert shuffled.cpu().tolist() == [int(together[i]) for i in order]
    for i in range(rows):
        alone = ts.sample(
            torch.from_numpy(logits[i : i + 1]).to(DEVICE),
            seeds=SEEDS[i],
            steps=STEPS[i],
            top_k=params["top_k"][i],
            top_p=params["top_p"][i],
            config=SMALL,
        )
        assert int(alone[0]) == int(together[i])


def test_bfloat16_logits_sample_their_float64_values() -> None:
    logits = torch.from_numpy(_logits(len(SEEDS), VOCAB, seed=9)).to(torch.bfloat16)
    expected = sampler.sample(
        logits.float().numpy().astype(np.float64), seeds=SEEDS, steps=STEPS, top_k=10
    )
    got = ts.sample(
        logits.to(DEVICE),
        seeds=_tensor(SEEDS, torch.int64),
        steps=_tensor(STEPS, torch.int64),
        top_k=10,
        config=SMALL,
    )
    assert got.cpu().tolist() == expected.tolist()


def test_rejects_bad_shapes_and_dtypes() -> None:
    with pytest.raises(ValueError, match="shape"):
        ts.sample(torch.zeros(3, device=DEVICE), seeds=0, steps=0)
    with pytest.raises(TypeError, match="float32"):
        ts.sample(torch.zeros((1, 3), dtype=torch.int32, device=DEVICE), seeds=0, steps=0)
    with pytest.raises(ValueError, match="length"):
        ts.sample(
            torch.zeros((2, 3), device=DEVICE), seeds=_tensor([1, 2, 3], torch.int64), steps=0
        )
    with pytest.raises(ValueError, match="stream"):
        ts.stream_bits(_tensor([0], torch.int64), _tensor([0], torch.int64), 4, stream=-1)
