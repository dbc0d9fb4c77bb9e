"""Triton kernels of the GPU sampler (the contract is sampler/README.md's).

Two launches per call, neither shaped by the batch size.

``slice_kernel`` (grid B x slices): each program takes a fixed slice of one row.
  * Rows without filters (temperature only, or T = 0): Gumbel-max over the slice, one
    Philox4x32-10 call per 4 tokens; writes the slice's best (score, id), packed in one int64.
  * Rows with 1 <= top_k <= K_FAST: the maximum of every group of GW consecutive tokens
    (no noise is needed there: only the <= K_FAST candidates get noise, in the row pass).
  * Other filtered rows: nothing (the row pass does all their work).
``row_kernel`` (grid B): reduces the slice partials of an unfiltered row in a fixed order,
or finishes a filtered row: the top-k candidates are found from the group maxima (the k-th
largest group maximum bounds the k-th largest logit from below), sorted, cut by top-k,
top-p and min-p, and drawn from. Rows whose candidates overflow the fixed caps, and rows
with top_p or min_p but no (small) top_k, take an exact slower path over the whole row.

Per-row parameters arrive either as pointers (a length-B or one-element tensor) or as one
scalar for the whole batch: ``MODES`` holds 2 bits per parameter (0 scalar, 1 per row,
2 one element); a float scalar travels as the int64 bits of its float64 value, so it is
exactly the value a float64 tensor would hold.

The jit functions they share live by concept: the Philox stream and its Gumbel noise
(computed in log2 units) in ``sampler._triton_random``, the (key, id) order of every
reduction in ``sampler._triton_order``, the row kernel's exact fallback in
``sampler._triton_exact``.
"""
# Triton reads the kernels' signatures itself; they carry no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import triton
import triton.language as tl

from sampler._triton_exact import _bisect_prefix, _count_mass, _sample_kept
from sampler._triton_order import (
    _argmax_combine,
    _in_prefix,
    _key_value,
    _ordered_key,
    _pack,
    _unpack_id,
    _unpack_key,
)
from sampler._triton_random import _group_bits, _gumbel2, _key_words, _token_bits

# Constants are written out where used: a module-level tl.constexpr costs a comparison at
# every launch (Triton checks that the globals a kernel used have not changed).

# Kernel arguments that may be a Python scalar: never specialise on their values.
_PARAMS = ["seeds", "steps", "temps", "top_ks", "top_ps", "min_ps"]


@triton.jit
def _param(arg, row, MODE: tl.constexpr, FLOAT: tl.constexpr):
    """One row's value of a per-row parameter: int64, or float64 when FLOAT."""
    if MODE == 0:
        v = tl.zeros([], tl.int64) + arg
        if FLOAT:
            v = v.to(tl.float64, bitcast=True)
    else:
        v = tl.load(arg + row if MODE == 1 else arg)
        v = v.to(tl.float64 if FLOAT else tl.int64)
    return v


@triton.jit
def _row_params(seeds, steps, temps, top_ks, top_ps, min_ps, row, MODES: tl.constexpr):
    seed = _param(seeds, row, MODES & 3, False)
    step = _param(steps, row, (MODES >> 2) & 3, False)
    temp = _param(temps, row, (MODES >> 4) & 3, True)
    top_k = _param(top_ks, row, (MODES >> 6) & 3, False)
    top_p = _param(top_ps, row, (MODES >> 8) & 3, True)
    min_p = _param(min_ps, row, (MODES >> 10) & 3, True)
    return seed, step, temp, top_k, top_p, min_p


@triton.jit
def _row_class(temp, top_k, top_p, min_p, vocab, K_FAST: tl.constexpr):
    """0: no filter (or T = 0); 1: top_k in [1, K_FAST] (candidate path); 2: other filters."""
    k_on = (top_k > 0) & (top_k < vocab)
    pure = (temp == 0.0) | ((~k_on) & (top_p >= 1.0) & (min_p <= 0.0))
    fast = k_on & (top_k <= K_FAST)
    return tl.where(pure, 0, tl.where(fast, 1, 2))


@triton.jit
def _scan_slice(
    row_ptr,
    vocab,
    part,
    inv_t2,
    seed,
    step,
    SLICE: tl.constexpr,
    GROUPS: tl.constexpr,
    GREEDY: tl.constexpr,
    MASKED: tl.constexpr,
    FAST_LOG: tl.constexpr,
):
    """Best (score, id) of one slice: score = logit * inv_t2 + noise (logit alone if GREEDY),
    folded tile by tile (4 * GROUPS tokens) into the lanes' best (score, tile).

    Each lane sees its tokens in increasing order, so a strict '>' keeps the lowest id of a
    tie; the final reduction breaks ties across lanes by id. Full slices unroll their tiles;
    the row's last, partial slice (MASKED) loops (it would otherwise set the register budget).
    """
    best_v = tl.full([4 * GROUPS], float("-inf"), tl.float32)
    best_t = tl.zeros([4 * GROUPS], tl.int32)
    for t in (range if MASKED else tl.static_range)(SLICE // (4 * GROUPS)):
        base = part * SLICE + t * (4 * GROUPS)
        lanes = tl.arange(0, 4 * GROUPS)
        if MASKED:
            logit = tl.load(row_ptr + base + lanes, mask=base + lanes < vocab, other=float("-inf"))
        else:
            logit = tl.load(row_ptr + base + lanes)
        logit = logit.to(tl.float32)
        if GREEDY:
            score = logit
        else:
            # A masked token's -inf stays -inf: the noise is finite.
            bits = _group_bits(base // 4 + tl.arange(0, GROUPS), seed, step, 0)
            score = logit * inv_t2 + _gumbel2(bits, FAST_LOG)
        take = score > best_v
        best_v = tl.where(take, score, best_v)
        best_t = tl.where(take, t, best_t)
    ids = part * SLICE + best_t * (4 * GROUPS) + tl.arange(0, 4 * GROUPS)
    # (highest score, lowest id): two plain reductions cost less than one over pairs.
    v = tl.max(best_v, 0)
    return v, tl.min(tl.where(best_v == v, ids, 2147483647), 0)


@triton.jit
def _group_max_keys(
    row_ptr, vocab, part, SLICE: tl.constexpr, GW: tl.constexpr, MASKED: tl.constexpr
):
    """Ordered key of the maximum of each group of GW tokens of the slice; 0 (below every
    float) for groups past the end of the row."""
    g = tl.arange(0, SLICE // GW)
    tok = part * SLICE + g[:, None] * GW + tl.arange(0, GW)[None, :]
    if MASKED:
        x = tl.load(row_ptr + tok, mask=tok < vocab, other=float("-inf"))
    else:
        x = tl.load(row_ptr + tok)
    key = _ordered_key(tl.max(x.to(tl.float32), 1))
    if MASKED:
        key = tl.where(part * SLICE + g * GW < vocab, key, 0)
    return key


@triton.jit(do_not_specialize=_PARAMS)
def slice_kernel(
    logits_ptr,
    row_stride,
    vocab,
    seeds,
    steps,
    temps,
    top_ks,
    top_ps,
    min_ps,
    ws_ptr,
    MODES: tl.constexpr,
    SLICE: tl.constexpr,
    GROUPS: tl.constexpr,
    GW: tl.constexpr,
    SLICES_POW2: tl.constexpr,
    WS_ROW: tl.constexpr,
    K_FAST: tl.constexpr,
    FAST_LOG: tl.constexpr,
):
    """One slice of one row: the partial argmax of an unfiltered row, or the group maxima of
    a top-k row. Workspace row: [SLICES_POW2 int64 partials | group-max keys (uint32) | ...]."""
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    seed, step, temp, top_k, top_p, min_p = _row_params(
        seeds, steps, temps, top_ks, top_ps, min_ps, row, MODES
    )
    cls = _row_class(temp, top_k, top_p, min_p, vocab, K_FAST)
    row_ptr = logits_ptr + row * row_stride
    ws_row = ws_ptr + row * WS_ROW
    masked = (part + 1) * SLICE > vocab
    if cls == 0:
        inv_t2 = (1.0 / tl.where(temp > 0.0, temp, 1.0) * 1.4426950408889634).to(tl.float32)
        # One compiled scan per arm (GREEDY and MASKED are constexpr): T = 0 takes the logits
        # alone, and only the row's last, partial slice masks its loads.
        if temp > 0.0:
            if masked:
                v, i = _scan_slice(
                    row_ptr, vocab, part, inv_t2, seed, step, SLICE, GROUPS, False, True, FAST_LOG
                )
                tl.store(ws_row + part, _pack(_ordered_key(v), i))
            else:
                v, i = _scan_slice(
                    row_ptr, vocab, part, inv_t2, seed, step, SLICE, GROUPS, False, False, FAST_LOG
                )
                tl.store(ws_row + part, _pack(_ordered_key(v), i))
        else:
            if masked:
                v, i = _scan_slice(
                    row_ptr, vocab, part, inv_t2, seed, step, SLICE, GROUPS, True, True, FAST_LOG
                )
                tl.store(ws_row + part, _pack(_ordered_key(v), i))
            else:
                v, i = _scan_slice(
                    row_ptr, vocab, part, inv_t2, seed, step, SLICE, GROUPS, True, False, FAST_LOG
                )
                tl.store(ws_row + part, _pack(_ordered_key(v), i))
    elif cls == 1:
        tm_ptr = (ws_row + SLICES_POW2).to(tl.pointer_type(tl.int32))
        g = tl.arange(0, SLICE // GW)
        if masked:
            key = _group_max_keys(row_ptr, vocab, part, SLICE, GW, True)
        else:
            key = _group_max_keys(row_ptr, vocab, part, SLICE, GW, False)
        tl.store(tm_ptr + part * (SLICE // GW) + g, key.to(tl.int32, bitcast=True))


@triton.jit
def bits_kernel(out_ptr, vocab, seeds_ptr, steps_ptr, stream, GROUPS: tl.constexpr):
    """Debug entry: the raw uint32 word of every token of every row, as the samplers draw it."""
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    seed = tl.load(seeds_ptr + row)
    step = tl.load(steps_ptr + row)
    g = part * GROUPS + tl.arange(0, GROUPS)
    tok = part * (4 * GROUPS) + tl.arange(0, 4 * GROUPS)
    x = _group_bits(g, seed, step, (tl.zeros([], tl.int64) + stream).to(tl.uint32))
    tl.store(out_ptr + row * vocab + tok, x.to(tl.int32, bitcast=True), mask=tok < vocab)


@triton.jit
def _kth_floor(keys, k):
    """A key <= the k-th largest of ``keys`` (uint32, 1 <= k <= len): the k-th largest's top
    16 bits, found by a bitwise search, with the low 16 bits cleared."""
    hi = keys >> 16
    p = tl.zeros([], tl.uint32)
    bit = tl.full([], 0x8000, tl.uint32)
    for _ in range(16):
        cand = p | bit
        n = tl.sum((hi >= cand).to(tl.int32), 0)
        p = tl.where(n >= k, cand, p)
        bit = bit >> 1
    return p << 16


@triton.jit(do_not_specialize=_PARAMS)
def row_kernel(
    logits_ptr,
    row_stride,
    vocab,
    seeds,
    steps,
    temps,
    top_ks,
    top_ps,
    min_ps,
    ws_ptr,
    out_ptr,
    n_slices,
    MODES: tl.constexpr,
    SLICE: tl.constexpr,
    GW: tl.constexpr,
    SLICES_POW2: tl.constexpr,
    WS_ROW: tl.constexpr,
    LANES: tl.constexpr,
    G_CAP: tl.constexpr,
    G_CHUNK: tl.constexpr,
    CAP: tl.constexpr,
    K_FAST: tl.constexpr,
    GROUPS: tl.constexpr,
    FAST_LOG: tl.constexpr,
):
    """One row's token: reduce the slice partials of an unfiltered row, or sample a filtered one.

    Filtered rows, fast path (1 <= top_k <= K_FAST): a floor F <= the k-th largest group
    maximum (so <= the k-th largest logit) from the slices' group maxima; the groups whose
    maximum reaches F (at most G_CAP) are read again and every logit >= F in them (at most
    CAP) is kept, sorted by (logit desc, id asc); top-k, top-p (float64 masses, renormalised
    over the top k) and min-p then cut that sorted set, and the Gumbel draw runs over it.
    Other filtered rows, and fast rows that overflow a cap (e.g. many tied logits), find
    their cut by a bitwise search over (ordered float key, token id), one pass over the row
    per step, then draw over the whole row: exact, slower.
    """
    row = tl.program_id(0).to(tl.int64)
    seed, step, temp, top_k, top_p, min_p = _row_params(
        seeds, steps, temps, top_ks, top_ps, min_ps, row, MODES
    )
    cls = _row_class(temp, top_k, top_p, min_p, vocab, K_FAST)
    ws_row = ws_ptr + row * WS_ROW
    if cls == 0:
        offs = tl.arange(0, SLICES_POW2)
        packed = tl.load(ws_row + offs, mask=offs < n_slices, other=-(2**63))
        tl.store(out_ptr + row, _unpack_id(tl.max(packed, 0)).to(tl.int64))
    else:
        NG: tl.constexpr = SLICE // GW
        k0, k1, s0, s1 = _key_words(seed, step)
        row_ptr = logits_ptr + row * row_stride
        inv_t = 1.0 / temp  # float64
        inv_t2 = (inv_t * 1.4426950408889634).to(tl.float32)
        log_min_p = tl.where(min_p > 0.0, tl.log(tl.where(min_p > 0.0, min_p, 1.0)), float("-inf"))
        cand_ptr = ws_row + SLICES_POW2 + SLICES_POW2 * NG // 2 + G_CAP // 2
        count = tl.full([], CAP + 1, tl.int32)
        row_max = tl.full([], float("-inf"), tl.float32)
        if cls == 1:
            tm_ptr = (ws_row + SLICES_POW2).to(tl.pointer_type(tl.int32))
            grp_ptr = (ws_row + SLICES_POW2 + SLICES_POW2 * NG // 2).to(tl.pointer_type(tl.int32))
            offs = tl.arange(0, SLICES_POW2 * NG)
            tmk = tl.load(tm_ptr + offs, mask=offs < n_slices * NG, other=0)
            tmk = tmk.to(tl.uint32, bitcast=True)
            floor = _kth_floor(tmk, top_k)
            qual = tmk >= floor
            n_groups = tl.sum(qual.to(tl.int32), 0)
            if n_groups <= G_CAP:
                pos = tl.cumsum(qual.to(tl.int32), 0) - 1
                tl.store(grp_ptr + pos, offs, mask=qual)
                tl.debug_barrier()
                n_cand = tl.zeros([], tl.int32)
                for first in range(0, n_groups, G_CHUNK):
                    gi = first + tl.arange(0, G_CHUNK)
                    grp = tl.load(grp_ptr + gi, mask=gi < n_groups, other=0)
                    tok = grp[:, None] * GW + tl.arange(0, GW)[None, :]
                    valid = (gi < n_groups)[:, None] & (tok < vocab)
                    logit = tl.load(row_ptr + tok, mask=valid, other=float("-inf"))
                    key = _ordered_key(logit.to(tl.float32))
                    hit = (valid & (key >= floor)).to(tl.int32)
                    per_group = tl.sum(hit, 1)
                    start = n_cand + tl.cumsum(per_group, 0) - per_group
                    pos2 = start[:, None] + tl.cumsum(hit, 1) - 1
                    tl.store(cand_ptr + pos2, _pack(key, tok), mask=(hit != 0) & (pos2 < CAP))
                    n_cand += tl.sum(per_group, 0)
                tl.debug_barrier()
                if n_cand <= CAP:
                    count = n_cand
                    row_max = _key_value(tl.max(tmk, 0))
        if count <= CAP:
            rank = tl.arange(0, CAP)
            there = rank < count
            packed = tl.load(cand_ptr + rank, mask=there, other=-(2**63))
            packed = tl.sort(packed, descending=True)
            ids = _unpack_id(packed)
            logit = _key_value(_unpack_key(packed))
            rel = (logit.to(tl.float64) - row_max) * inv_t
            keep = there & (rank < top_k)
            e = tl.where(keep, tl.exp(rel), 0.0)
            if top_p < 1.0:
                total = tl.sum(e, 0)
                before = tl.cumsum(e, 0) - e
                keep = keep & ((rank == 0) | (before < top_p * total))
            keep = keep & (rel >= log_min_p)
            noise = _gumbel2(_token_bits(ids, k0, k1, s0, s1), FAST_LOG)
            score = tl.where(keep, logit * inv_t2 + noise, float("-inf"))
            ids = tl.where(keep, ids, 2147483647)
            _, token = tl.reduce((score, ids), 0, _argmax_combine)
            tl.store(out_ptr + row, token.to(tl.int64))
        else:
            lanes = tl.arange(0, LANES)
            lane_max = tl.full([LANES], float("-inf"), tl.float32)
            for base in range(0, vocab, LANES):
                ids = base + lanes
                logit = tl.load(row_ptr + ids, mask=ids < vocab, other=float("-inf"))
                lane_max = tl.maximum(lane_max, logit.to(tl.float32))
            row_max = tl.max(lane_max, 0)
            k_on = (top_k > 0) & (top_k < vocab)
            cut_key = tl.zeros([], tl.uint32)
            cut_id = tl.full([], 2147483647, tl.int32)
            if k_on:
                cut_key, cut_id = _bisect_prefix(
                    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, top_k, 0.0, LANES
                )
            p_key = tl.zeros([], tl.uint32)
            p_id = tl.full([], 2147483647, tl.int32)
            if top_p < 1.0:
                _, total = _count_mass(
                    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, p_key, p_id, LANES
                )
                p_key, p_id = _bisect_prefix(
                    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, 1, top_p * total, LANES
                )
            if _in_prefix(p_key, p_id, cut_key, cut_id):
                cut_key = p_key
                cut_id = p_id
            token = _sample_kept(
                row_ptr,
                vocab,
                inv_t,
                row_max,
                log_min_p,
                seed,
                step,
                cut_key,
                cut_id,
                GROUPS,
                FAST_LOG,
            )
            tl.store(out_ptr + row, token.to(tl.int64))
