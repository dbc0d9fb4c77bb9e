"""Triton kernels of the GPU sampler (the contract is sampler/README.md's).

Two launches per call. ``slice_kernel`` (grid B x slices) serves the rows that need no
filter (temperature only, or T = 0): each program takes a fixed slice of one row and
returns its best (score, token id). ``row_kernel`` (grid B) finishes those rows from the
slice partials and samples the filtered rows, one program per row.

Every tile has 4 * GROUPS consecutive tokens: one Philox4x32-10 call per group of 4
gives the words of its 4 tokens. Nothing depends on the batch size: slice and tile
sizes are constants, and the only cross-element reduction on a pure row is an argmax
whose result (highest score, lowest id on ties) is the same in any order.
"""
# Triton reads the kernels' signatures itself; they carry no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import triton
import triton.language as tl

_INT32_MAX = tl.constexpr(2147483647)
_TWO_M32 = tl.constexpr(2.3283064365386963e-10)  # 2**-32
_SERIES_BELOW = tl.constexpr(0.0078125)  # 2**-7: under it -log1p(-u) by its series


@triton.jit
def _philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint32 words (Random123), vectorised over the counter blocks."""
    for _ in tl.static_range(10):
        a0 = c0
        a2 = c2
        c0 = tl.umulhi(a2, 0xCD9E8D57) ^ c1 ^ k0
        c2 = tl.umulhi(a0, 0xD2511F53) ^ c3 ^ k1
        c1 = a2 * 0xCD9E8D57
        c3 = a0 * 0xD2511F53
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def _row_key(seeds_ptr, steps_ptr, row):
    """The row's key words and step words, as uint32 scalars."""
    seed = tl.load(seeds_ptr + row)
    step = tl.load(steps_ptr + row)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    s0 = (step & 0xFFFFFFFF).to(tl.uint32)
    s1 = ((step >> 32) & 0xFFFFFFFF).to(tl.uint32)
    return k0, k1, s0, s1


@triton.jit
def _group_bits(groups, k0, k1, s0, s1, stream):
    """uint32 words [4 G] of tokens 4 * groups[0] ... 4 * groups[-1] + 3 (groups consecutive).

    One Philox call per group; tl.join keeps a group's 4 words in one thread, so no
    thread repeats another's Philox call.
    """
    c0 = groups.to(tl.uint32)
    zero = tl.zeros_like(c0)
    w0, w1, w2, w3 = _philox(c0, zero + s0, zero + s1, zero + stream, zero + k0, zero + k1)
    both = tl.join(tl.join(w0, w2), tl.join(w1, w3))  # the new axis is the minor one
    return tl.reshape(both, [4 * groups.shape[0]])


@triton.jit
def _token_bits(ids, k0, k1, s0, s1):
    """uint32 word of each token id in ``ids`` (any shape): one Philox call per id."""
    c0 = (ids // 4).to(tl.uint32)
    zero = tl.zeros_like(c0)
    w0, w1, w2, w3 = _philox(c0, zero + s0, zero + s1, zero, zero + k0, zero + k1)
    q = ids % 4
    return tl.where(q == 0, w0, tl.where(q == 1, w1, tl.where(q == 2, w2, w3)))


@triton.jit
def _gumbel(x):
    """g = -log(-log1p(-u)), u = (x + 0.5) * 2**-32, in float32.

    -log1p(-u) is taken from its series where u is small (the tokens whose noise is
    large, that is the likely winners) and as -log(1 - u) with 1 - u formed from ~x
    elsewhere, so no u rounds to 1 and no accurate log1p is needed.
    """
    u = (x.to(tl.float32) + 0.5) * _TWO_M32
    series = u * (1.0 + u * (0.5 + u * (0.3333333333 + u * (0.25 + u * 0.2))))
    w = ((x ^ 0xFFFFFFFF).to(tl.float32) + 0.5) * _TWO_M32
    e = tl.where(u < _SERIES_BELOW, series, -tl.log(w))
    return -tl.log(e)


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
def _in_prefix(key, ids, cut_key, cut_id):
    """Whether (key, id) ranks at or before (cut_key, cut_id) by (key desc, id asc)."""
    return (key > cut_key) | ((key == cut_key) & (ids <= cut_id))


@triton.jit
def _is_pure(temp, top_k, top_p, min_p, vocab):
    k_on = (top_k > 0) & (top_k < vocab)
    return (temp == 0.0) | ((~k_on) & (top_p >= 1.0) & (min_p <= 0.0))


@triton.jit
def slice_kernel(
    logits_ptr,
    row_stride,
    vocab,
    seeds_ptr,
    steps_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    min_p_ptr,
    part_val_ptr,
    part_idx_ptr,
    n_slices,
    SLICE: tl.constexpr,
    GROUPS: tl.constexpr,
):
    """Best (score, id) of one slice of one unfiltered row; filtered rows are skipped."""
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    temp = tl.load(temp_ptr + row)
    pure = _is_pure(
        temp, tl.load(top_k_ptr + row), tl.load(top_p_ptr + row), tl.load(min_p_ptr + row), vocab
    )
    if pure:
        k0, k1, s0, s1 = _row_key(seeds_ptr, steps_ptr, row)
        inv_t = (1.0 / tl.where(temp > 0.0, temp, 1.0)).to(tl.float32)
        row_ptr = logits_ptr + row * row_stride
        groups = tl.arange(0, GROUPS)
        lanes = tl.arange(0, 4 * GROUPS)
        best_v = tl.full([4 * GROUPS], float("-inf"), tl.float32)
        best_i = tl.full([4 * GROUPS], _INT32_MAX, tl.int32)
        for step in tl.range(0, SLICE // (4 * GROUPS)):
            base = part * SLICE + step * (4 * GROUPS)
            tok = base + lanes
            valid = tok < vocab
            logit = tl.load(row_ptr + tok, mask=valid, other=float("-inf")).to(tl.float32)
            if temp > 0.0:
                noise = _gumbel(_group_bits(base // 4 + groups, k0, k1, s0, s1, 0))
                score = logit * inv_t + noise
            else:
                score = logit
            score = tl.where(valid, score, float("-inf"))
            tok = tl.where(valid, tok, _INT32_MAX)
            take = (score > best_v) | ((score == best_v) & (tok < best_i))
            best_v = tl.where(take, score, best_v)
            best_i = tl.where(take, tok, best_i)
        v, i = tl.reduce((best_v, best_i), 0, _argmax_combine)
        tl.store(part_val_ptr + row * n_slices + part, v)
        tl.store(part_idx_ptr + row * n_slices + part, i)


@triton.jit
def bits_kernel(out_ptr, vocab, seeds_ptr, steps_ptr, stream, GROUPS: tl.constexpr):
    """Debug entry: the raw uint32 word of every token of every row, as the samplers draw it."""
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    k0, k1, s0, s1 = _row_key(seeds_ptr, steps_ptr, row)
    g = part * GROUPS + tl.arange(0, GROUPS)
    tok = part * (4 * GROUPS) + tl.arange(0, 4 * GROUPS)
    x = _group_bits(g, k0, k1, s0, s1, (tl.zeros([], tl.int64) + stream).to(tl.uint32))
    tl.store(out_ptr + row * vocab + tok, x.to(tl.int32, bitcast=True), mask=tok < vocab)


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
        c, m = _count_mass(row_ptr, vocab, row_max, inv_t, cut_key, cut_id, cand, _INT32_MAX, LANES)
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
    row_ptr, vocab, inv_t, row_max, log_min_p, k0, k1, s0, s1, cut_key, cut_id, GROUPS: tl.constexpr
):
    """Gumbel-max over the row, keeping tokens in the cut prefix with (l - max) / T >= log min_p."""
    groups = tl.arange(0, GROUPS)
    lanes = tl.arange(0, 4 * GROUPS)
    inv_t32 = inv_t.to(tl.float32)
    best_v = tl.full([4 * GROUPS], float("-inf"), tl.float32)
    best_i = tl.full([4 * GROUPS], _INT32_MAX, tl.int32)
    for base in range(0, vocab, 4 * GROUPS):
        tok = base + lanes
        valid = tok < vocab
        logit = tl.load(row_ptr + tok, mask=valid, other=float("-inf")).to(tl.float32)
        key = _ordered_key(logit)
        keep = valid & _in_prefix(key, tok, cut_key, cut_id)
        keep = keep & ((logit.to(tl.float64) - row_max) * inv_t >= log_min_p)
        noise = _gumbel(_group_bits(base // 4 + groups, k0, k1, s0, s1, 0))
        score = tl.where(keep, logit * inv_t32 + noise, float("-inf"))
        tok = tl.where(keep, tok, _INT32_MAX)
        take = (score > best_v) | ((score == best_v) & (tok < best_i))
        best_v = tl.where(take, score, best_v)
        best_i = tl.where(take, tok, best_i)
    _, i = tl.reduce((best_v, best_i), 0, _argmax_combine)
    return i


@triton.jit
def row_kernel(
    logits_ptr,
    row_stride,
    vocab,
    seeds_ptr,
    steps_ptr,
    temp_ptr,
    top_k_ptr,
    top_p_ptr,
    min_p_ptr,
    part_val_ptr,
    part_idx_ptr,
    n_slices,
    scratch_ptr,
    out_ptr,
    SLICES_POW2: tl.constexpr,
    LANES: tl.constexpr,
    CAP: tl.constexpr,
    K_FAST: tl.constexpr,
    GROUPS: tl.constexpr,
):
    """One row's token: reduce the slice partials of an unfiltered row, or sample a filtered one.

    Filtered rows, fast path (1 <= top_k <= K_FAST): pass 1 takes LANES lane maxima; the
    k-th largest of them is a lower bound of the k-th largest logit, so pass 2 gathers every
    logit at or above it (at most CAP) and the rest happens on that small sorted set, with
    float64 masses. Other filtered rows (top_p or min_p without top_k, many ties) find their
    cut by bitwise search over the row, then draw over the whole row.
    """
    row = tl.program_id(0).to(tl.int64)
    temp = tl.load(temp_ptr + row)
    top_k = tl.load(top_k_ptr + row)
    top_p = tl.load(top_p_ptr + row)
    min_p = tl.load(min_p_ptr + row)
    if _is_pure(temp, top_k, top_p, min_p, vocab):
        offs = tl.arange(0, SLICES_POW2)
        there = offs < n_slices
        v = tl.load(part_val_ptr + row * n_slices + offs, mask=there, other=float("-inf"))
        i = tl.load(part_idx_ptr + row * n_slices + offs, mask=there, other=_INT32_MAX)
        _, token = tl.reduce((v, i), 0, _argmax_combine)
        tl.store(out_ptr + row, token.to(tl.int64))
    else:
        k0, k1, s0, s1 = _row_key(seeds_ptr, steps_ptr, row)
        row_ptr = logits_ptr + row * row_stride
        inv_t = 1.0 / temp  # float64
        lanes = tl.arange(0, LANES)
        lane_max = tl.full([LANES], float("-inf"), tl.float32)
        for base in range(0, vocab, LANES):
            ids = base + lanes
            logit = tl.load(row_ptr + ids, mask=ids < vocab, other=float("-inf"))
            lane_max = tl.maximum(lane_max, logit.to(tl.float32))
        row_max = tl.max(lane_max, 0)
        k_on = (top_k > 0) & (top_k < vocab)
        count = tl.full([], CAP + 1, tl.int32)
        if k_on & (top_k <= K_FAST):
            ranked = tl.sort(lane_max, descending=True)
            floor = tl.max(tl.where(lanes == top_k - 1, ranked, float("-inf")), 0)
            count = tl.zeros([], tl.int32)
            for base in range(0, vocab, LANES):
                ids = base + lanes
                valid = ids < vocab
                logit = tl.load(row_ptr + ids, mask=valid, other=float("-inf")).to(tl.float32)
                hit = valid & (logit >= floor)
                pos = count + tl.cumsum(hit.to(tl.int32), 0) - 1
                # (key, ~id) as one signed int64: sorting it descending ranks by (l desc, id asc).
                key = (_ordered_key(logit) ^ 0x80000000).to(tl.int32, bitcast=True)
                packed = (key.to(tl.int64) << 32) | (ids.to(tl.int64) ^ 0xFFFFFFFF)
                tl.store(scratch_ptr + row * CAP + pos, packed, mask=hit & (pos < CAP))
                count += tl.sum(hit.to(tl.int32), 0)
        log_min_p = tl.where(min_p > 0.0, tl.log(tl.where(min_p > 0.0, min_p, 1.0)), float("-inf"))
        if count <= CAP:
            rank = tl.arange(0, CAP)
            there = rank < count
            packed = tl.load(scratch_ptr + row * CAP + rank, mask=there, other=-(2**63))
            packed = tl.sort(packed, descending=True)
            key = ((packed >> 32).to(tl.int32) ^ -2147483648).to(tl.uint32, bitcast=True)
            ids = ((packed & 0xFFFFFFFF) ^ 0xFFFFFFFF).to(tl.int32)
            logit = _key_value(key)
            rel = (logit.to(tl.float64) - row_max) * inv_t
            keep = there & (rank < top_k)
            e = tl.where(keep, tl.exp(rel), 0.0)
            if top_p < 1.0:
                total = tl.sum(e, 0)
                before = tl.cumsum(e, 0) - e
                keep = keep & ((rank == 0) | (before < top_p * total))
            keep = keep & (rel >= log_min_p)
            noise = _gumbel(_token_bits(ids, k0, k1, s0, s1))
            score = tl.where(keep, logit * inv_t.to(tl.float32) + noise, float("-inf"))
            ids = tl.where(keep, ids, _INT32_MAX)
            _, token = tl.reduce((score, ids), 0, _argmax_combine)
        else:
            cut_key = tl.zeros([], tl.uint32)
            cut_id = tl.full([], _INT32_MAX, tl.int32)
            if k_on:
                cut_key, cut_id = _bisect_prefix(
                    row_ptr, vocab, row_max, inv_t, cut_key, cut_id, top_k, 0.0, LANES
                )
            p_key = tl.zeros([], tl.uint32)
            p_id = tl.full([], _INT32_MAX, tl.int32)
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
                row_ptr, vocab, inv_t, row_max, log_min_p, k0, k1, s0, s1, cut_key, cut_id, GROUPS
            )
        tl.store(out_ptr + row, token.to(tl.int64))
