"""The ways a real engine's sampling departs from the per-row contract, to reproduce them.

Each mode stands for an engine that exists (docs/sampling.md has the references):

- ``per-row`` (the default): the patched sampler. A row's draw depends on its own
  (seed, step) only, whatever shares its batch (ft serve after issue #693).
- ``unpatched``: the seed is ignored; the whole batch draws from one shared
  generator (ft serve before #693).
- ``per-batch``: one random stream for the batch, keyed by its first seeded row,
  each row drawing by its position in the batch. FlashInfer's sampling kernels read
  only the first element of the per-row seed tensor and seed each row by its index
  (TensorRT-LLM saw seeds [1111, 2222, ...] behave like all 1111): a request alone
  replays, the same request in a batch with others does not.

``batch_variance`` is the logits' side, independent of the sampler: kernels that are
not batch-invariant (split reductions whose split depends on the batch size) give a
row slightly different logits in batches of different sizes, so near-ties flip under
load (ft serve #307), even with a per-row sampler.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

PER_ROW = "per-row"
UNPATCHED = "unpatched"
PER_BATCH = "per-batch"
SEED_MODES = (PER_ROW, UNPATCHED, PER_BATCH)

# The size of the batch-size-dependent change, in nats: float32 logits summed in a
# different order move by about this much (ft serve #307); only near-ties feel it.
BATCH_VARIANCE = 0.1
_INT64_SPAN = 2**64


def batch_seeds(
    seeds: Sequence[int | None], steps: Sequence[int], fallback: int
) -> tuple[list[int], list[int]]:
    """The per-batch stream as per-row (seed, step) pairs for the per-row sampler: the key
    is the first seeded row's seed (``fallback`` when no row has one) and its step, and
    row i draws the key's stream at position i."""
    key, step = fallback, 0
    for seed, at in zip(seeds, steps, strict=True):
        if seed is not None:
            key, step = seed, at
            break
    return [_wrap(key + i) for i in range(len(seeds))], [step] * len(seeds)


def batch_variance(logits: npt.NDArray[np.float32]) -> None:
    """Add, in place, the batch-size-dependent change to ``logits`` [B, V]."""
    rows, vocab = logits.shape
    logits += _pattern(rows.bit_length(), vocab)


@functools.cache
def _pattern(split: int, vocab: int) -> npt.NDArray[np.float32]:
    # A fixed pattern per reduction split, chosen by batch size in powers of two (1,
    # 2-3, 4-7, ...) as kernels choose their split: the same split, the same logits.
    rng = np.random.default_rng(split)
    pattern: npt.NDArray[np.float32] = rng.uniform(-BATCH_VARIANCE, BATCH_VARIANCE, vocab).astype(
        np.float32
    )
    return pattern


def _wrap(value: int) -> int:
    """``value`` as a signed 64-bit integer (two's complement)."""
    value %= _INT64_SPAN
    return value - _INT64_SPAN if value >= 2**63 else value
