"""The CPU reference sampler: per-row filters, then Gumbel-max with per-row Philox noise.

A row's token depends only on that row's logits and parameters and on its
(seed, step): never on its batch position or its neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sampler.filters import min_p_mask, top_k_mask, top_p_mask
from sampler.stream import batch_bits, gumbel, token_bits

__all__ = ["sample"]

PerRow = npt.ArrayLike | Sequence[float] | Sequence[int] | float | int

# Below this share of kept tokens, draw noise only for kept tokens (one Philox
# block per token) rather than for the whole row (one block per 4 tokens).
_SPARSE_SHARE = 0.2


def sample(
    logits: npt.ArrayLike,
    *,
    seeds: PerRow,
    steps: PerRow,
    temperature: PerRow = 1.0,
    top_k: PerRow = 0,
    top_p: PerRow = 1.0,
    min_p: PerRow = 0.0,
) -> npt.NDArray[np.int64]:
    """One token id per row of ``logits`` [B, V]; per-row parameters are scalars or length B."""
    raw = np.asarray(logits)
    if raw.ndim != 2 or raw.shape[1] == 0:
        raise ValueError(f"logits must have shape [B, V] with V >= 1, got {raw.shape}")
    if raw.dtype.kind != "f":
        raise TypeError(f"logits must be floating point, got {raw.dtype}")
    x = raw.astype(np.float64, copy=False)
    rows, vocab = x.shape
    seed_arr = _per_row(seeds, rows, "seeds", integer=True)
    step_arr = _per_row(steps, rows, "steps", integer=True)
    temp = _per_row(temperature, rows, "temperature")
    k_arr = _per_row(top_k, rows, "top_k", integer=True)
    p_arr = _per_row(top_p, rows, "top_p")
    m_arr = _per_row(min_p, rows, "min_p")
    if np.any(~np.isfinite(temp) | (temp < 0)):
        raise ValueError("temperature must be finite and >= 0")
    if np.any(~(p_arr >= 0) | (p_arr > 1)):
        raise ValueError("top_p must lie in [0, 1]")
    if np.any(~(m_arr >= 0) | (m_arr > 1)):
        raise ValueError("min_p must lie in [0, 1]")

    tokens: npt.NDArray[np.int64] = np.argmax(x, axis=1).astype(np.int64)  # ties -> lowest id
    hot = np.flatnonzero(temp > 0)
    if hot.size == 0:
        return tokens
    s = x[hot] / temp[hot, None]
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    keep = _keep_mask(p, k_arr[hot], p_arr[hot], m_arr[hot])
    scores = np.full_like(s, -np.inf)
    if np.count_nonzero(keep) < _SPARSE_SHARE * keep.size:
        at_row, at_token = np.nonzero(keep)
        bits = token_bits(seed_arr[hot][at_row], step_arr[hot][at_row], at_token)
        scores[at_row, at_token] = s[at_row, at_token] + gumbel(bits)
    else:
        noise = gumbel(batch_bits(seed_arr[hot], step_arr[hot], vocab))
        np.add(s, noise, out=scores, where=keep)
    tokens[hot] = np.argmax(scores, axis=1)  # exact ties -> lowest id
    return tokens


def _keep_mask(
    p: npt.NDArray[np.float64],
    top_k: npt.NDArray[Any],
    top_p: npt.NDArray[np.float64],
    min_p: npt.NDArray[np.float64],
) -> npt.NDArray[np.bool_]:
    """The intersection of the three filters, row by row."""
    vocab = p.shape[1]
    keep = np.ones(p.shape, dtype=bool)
    for i in range(p.shape[0]):
        k = int(top_k[i])
        if 0 < k < vocab:
            keep[i] = top_k_mask(p[i], k)
        if top_p[i] < 1.0:
            keep[i] &= top_p_mask(p[i], float(top_p[i]), keep[i])
    filtered = min_p > 0
    if filtered.any():
        keep[filtered] &= min_p_mask(p[filtered], min_p[filtered])
    return keep


def _per_row(value: PerRow, rows: int, name: str, *, integer: bool = False) -> npt.NDArray[Any]:
    arr = np.asarray(value)
    if integer:
        if arr.dtype.kind == "O" or arr.dtype == np.uint64:
            return _broadcast(arr, rows, name)  # range-checked where used
        if arr.dtype.kind not in "iub":
            raise TypeError(f"{name} must be integers, got {arr.dtype}")
        arr = arr.astype(np.int64)
    else:
        if arr.dtype.kind not in "iubf":
            raise TypeError(f"{name} must be numbers, got {arr.dtype}")
        arr = arr.astype(np.float64)
    return _broadcast(arr, rows, name)


def _broadcast(arr: npt.NDArray[Any], rows: int, name: str) -> npt.NDArray[Any]:
    if arr.ndim == 0:
        return np.full(rows, arr.item(), dtype=arr.dtype)
    if arr.shape != (rows,):
        raise ValueError(f"{name} must be a scalar or have length {rows}, got shape {arr.shape}")
    return arr
