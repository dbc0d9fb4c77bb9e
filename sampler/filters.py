"""Top-k, top-p and min-p as boolean keep-masks over one row's probabilities.

Every ranking is by (probability desc, token id asc), so ties are broken the same
way on every engine and every batch composition.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["min_p_mask", "top_k_mask", "top_p_mask"]

F64Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_TOP_P_HEAD = 256


def top_k_mask(p: F64Array, k: int) -> BoolArray:
    """Keep the k tokens ranked first by (p desc, id asc); k <= 0 or k >= V keeps all."""
    vocab = p.shape[-1]
    if k <= 0 or k >= vocab:
        return np.ones(vocab, dtype=bool)
    # argpartition finds the k-th largest value; ties at that value go to the lowest ids.
    threshold = p[np.argpartition(-p, k - 1)[k - 1]]
    above = p > threshold
    at = p == threshold
    room = k - int(np.count_nonzero(above))
    kept: BoolArray = above | (at & (np.cumsum(at) <= room))
    return kept


def top_p_mask(p: F64Array, top_p: float, keep: BoolArray) -> BoolArray:
    """Among ``keep``, the shortest (p desc, id asc) prefix whose renormalised mass >= top_p."""
    vocab = p.shape[-1]
    if top_p >= 1.0:
        return np.ones(vocab, dtype=bool)
    ids = np.flatnonzero(keep)
    q = p[ids] / p[ids].sum()
    # Sort only as many leading tokens as needed: the cumulative sum of a prefix of
    # the full ranking is bit-identical to the full cumulative sum's prefix.
    head = min(_TOP_P_HEAD, ids.size)
    while True:
        lead = np.flatnonzero(top_k_mask(q, head)) if head < ids.size else np.arange(ids.size)
        order = lead[np.argsort(-q[lead], kind="stable")]  # stable on ascending ids
        cumulative = np.cumsum(q[order])
        count = int(np.searchsorted(cumulative, top_p, side="left")) + 1
        if count <= head or head == ids.size:
            break
        head = min(head * 8, ids.size)
    out = np.zeros(vocab, dtype=bool)
    out[ids[order[:count]]] = True
    return out


def min_p_mask(p: npt.NDArray[np.float64], min_p: npt.NDArray[np.float64]) -> BoolArray:
    """Keep tokens with p >= min_p * max(p), row by row over a [B, V] batch."""
    kept: BoolArray = p >= min_p[:, None] * p.max(axis=-1, keepdims=True)
    return kept
