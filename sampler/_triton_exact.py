"""The row kernel's exact fallback, as Triton jit functions.

Filtered rows that the candidate path does not serve (top_p or min_p without a top_k <=
K_FAST, top_k > K_FAST) and top-k rows whose candidates overflow a cap (e.g. many tied
logits) find their cut by a bitwise search over (ordered float key, token id), one pass
over the row per step (``_bisect_prefix``, counting with ``_count_mass``), then draw over
the whole row (``_sample_kept``): exact, slower, one program per row. ``row_kernel``
(sampler/_triton_kernels.py) finds the row's maximum and combines the top-k and top-p cuts;
min-p is applied in the draw.
"""
# Triton reads the kernels' signatures itself; they carry no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import triton
import triton.language as tl

from sampler._triton_order import _argmax_combine, _in_prefix, _ordered_key
from sampler._triton_random import _group_bits, _gumbel2


@triton.jit
def _count_mass(
    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, at_key, at_id, LANES: tl.constexpr
):
    """(count, mass) of the tokens in both prefixes; mass = sum exp((l - max) / T)."""
    lanes = tl.arange(0, LANES)
    count = tl.zeros([LANES], tl.int32)
    mass = tl.zeros([LANES], tl.float64)
    for base in range(0, vocab, LANES):
        ids = base + lanes
        valid = ids < vocab
        logit = tl.load(row_ptr + ids, mask=valid, other=float("-inf")).to(tl.float32)
        key = _ordered_key(logit)
        hit = valid & _in_prefix(key, ids, cut_key, cut_id) & _in_prefix(key, ids, at_key, at_id)
        count += hit.to(tl.int32)
        e = tl.exp((logit - row_max) * inv_t)
        mass += tl.where(hit, e, 0.0).to(tl.float64)
    return tl.sum(count, 0), tl.sum(mass, 0)


@triton.jit
def _bisect_prefix(
    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, need_count, need_mass, LANES: tl.constexpr
):
    """The shortest (key desc, id asc) prefix inside the cut holding >= need_count tokens and
    >= need_mass mass, as its last (key, id); a bitwise search, one pass over the row a step.
    """
    key = tl.zeros([], tl.uint32)
    bit = tl.full([], 0x80000000, tl.uint32)
    for _ in range(32):
        cand = key | bit
        c, m = _count_mass(row_ptr, vocab, row_max, inv_t, cut_key, cut_id, cand, 2147483647, LANES)
        if (c >= need_count) & (m >= need_mass):
            key = cand
        bit = bit >> 1
    # Among the tokens at that key, the smallest id that completes the prefix.
    top = 1
    while top < vocab:
        top *= 2
    below = -1
    while top > 0:
        c, m = _count_mass(row_ptr, vocab, row_max, inv_t, cut_key, cut_id, key, below + top, LANES)
        if (c < need_count) | (m < need_mass):
            below += top
        top = top // 2
    return key, below + 1


@triton.jit
def _sample_kept(
    row_ptr,
    vocab,
    inv_t,
    row_max,
    log_min_p,
    seed,
    step,
    cut_key,
    cut_id,
    GROUPS: tl.constexpr,
    FAST_LOG: tl.constexpr,
):
    """Gumbel-max over the row, keeping tokens in the cut prefix with (l - max) / T >= log min_p."""
    groups = tl.arange(0, GROUPS)
    lanes = tl.arange(0, 4 * GROUPS)
    inv_t2 = (inv_t * 1.4426950408889634).to(tl.float32)
    best_v = tl.full([4 * GROUPS], float("-inf"), tl.float32)
    best_i = tl.full([4 * GROUPS], 2147483647, tl.int32)
    for base in range(0, vocab, 4 * GROUPS):
        tok = base + lanes
        valid = tok < vocab
        logit = tl.load(row_ptr + tok, mask=valid, other=float("-inf")).to(tl.float32)
        key = _ordered_key(logit)
        keep = valid & _in_prefix(key, tok, cut_key, cut_id)
        keep = keep & ((logit.to(tl.float64) - row_max) * inv_t >= log_min_p)
        noise = _gumbel2(_group_bits(base // 4 + groups, seed, step, 0), FAST_LOG)
        score = tl.where(keep, logit * inv_t2 + noise, float("-inf"))
        tok = tl.where(keep, tok, 2147483647)
        take = (score > best_v) | ((score == best_v) & (tok < best_i))
        best_v = tl.where(take, score, best_v)
        best_i = tl.where(take, tok, best_i)
    _, i = tl.reduce((best_v, best_i), 0, _argmax_combine)
    return i
