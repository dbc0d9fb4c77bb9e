"""Philox4x32-10, the counter-based generator of Salmon et al. (SC'11, Random123).

Written on explicit uint32 words, with the 32x32->64 products done in uint64 and
split into hi/lo halves, so that a GPU kernel doing the same arithmetic on
uint32 registers reproduces every output word bit for bit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["philox4x32_10"]

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_ROUNDS = 10

U32Array = npt.NDArray[np.uint32]


def philox4x32_10(counter: npt.ArrayLike, key: npt.ArrayLike) -> U32Array:
    """Philox4x32-10 of counter uint32 (..., 4) under key uint32 (..., 2): uint32 (..., 4)."""
    ctr = _as_words(counter, 4, "counter")
    k = _as_words(key, 2, "key")
    shape = np.broadcast_shapes(ctr.shape[:-1], k.shape[:-1])
    # uint64 working words: every value stays < 2**32 except the two products.
    c0, c1, c2, c3 = (
        np.array(np.broadcast_to(ctr[..., i], shape), dtype=np.uint64) for i in range(4)
    )
    k0 = k[..., 0].astype(np.uint64)
    k1 = k[..., 1].astype(np.uint64)
    p0 = np.empty(shape, dtype=np.uint64)
    p1 = np.empty(shape, dtype=np.uint64)
    for r in range(_ROUNDS):
        if r:
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        np.multiply(c0, _M0, out=p0)
        np.multiply(c2, _M1, out=p1)
        # (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0), in place.
        np.right_shift(p1, _SHIFT32, out=c0)
        c0 ^= c1
        c0 ^= k0
        np.right_shift(p0, _SHIFT32, out=c2)
        c2 ^= c3
        c2 ^= k1
        np.bitwise_and(p1, _MASK32, out=c1)
        np.bitwise_and(p0, _MASK32, out=c3)
    out = np.empty((*shape, 4), dtype=np.uint32)
    for i, word in enumerate((c0, c1, c2, c3)):
        out[..., i] = word
    return out


def _as_words(value: npt.ArrayLike, width: int, name: str) -> U32Array:
    arr = np.asarray(value)
    if arr.dtype != np.uint32:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer array, got {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF):
            raise ValueError(f"{name} words must lie in [0, 2**32)")
        arr = arr.astype(np.uint32)
    if arr.ndim == 0 or arr.shape[-1] != width:
        raise ValueError(f"{name} must have shape (..., {width}), got {arr.shape}")
    return arr
