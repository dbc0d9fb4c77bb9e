"""The order of the GPU sampler's reductions, as Triton jit functions.

Every reduction of the kernels is an argmax by (highest score, lowest id), or runs over
one row in a fixed order, so a row's token is the same alone or in any batch. Scores and
logits are compared as uint32 keys whose unsigned order is their float order
(``_ordered_key``), and a (key, id) pair travels as one int64 whose signed maximum is the
highest key with the lowest id (``_pack``): the slice partials, the candidates of a top-k
row (sorted as int64s) and the cut of the exact fallback (a prefix by key desc, id asc)
all use this one order.
"""
# Triton reads the kernels' signatures itself; they carry no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _argmax_combine(v1, i1, v2, i2):
    first = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(first, v1, v2), tl.where(first, i1, i2)


@triton.jit
def _ordered_key(x):
    """uint32 whose unsigned order is the float order of x (float32); -0.0 counts as +0.0."""
    bits = tl.where(x == 0.0, 0.0, x).to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits ^ -2147483648, ~bits).to(tl.uint32, bitcast=True)


@triton.jit
def _key_value(key):
    """Inverse of ``_ordered_key``."""
    bits = key.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ -2147483648, ~bits).to(tl.float32, bitcast=True)


@triton.jit
def _pack(key, ids):
    """(ordered key, id) as one int64 whose signed order is (key asc, id desc): its maximum
    is the highest key with the lowest id."""
    hi = (key ^ 0x80000000).to(tl.int32, bitcast=True).to(tl.int64)
    return (hi << 32) | (ids.to(tl.int64) ^ 0xFFFFFFFF)


@triton.jit
def _unpack_id(packed):
    return ((packed & 0xFFFFFFFF) ^ 0xFFFFFFFF).to(tl.int32)


@triton.jit
def _unpack_key(packed):
    return ((packed >> 32).to(tl.int32) ^ -2147483648).to(tl.uint32, bitcast=True)


@triton.jit
def _in_prefix(key, ids, cut_key, cut_id):
    """Whether (key, id) ranks at or before (cut_key, cut_id) by (key desc, id asc)."""
    return (key > cut_key) | ((key == cut_key) & (ids <= cut_id))
