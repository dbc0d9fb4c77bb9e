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

Noise is computed in log2 units: with e = -log1p(-u), the score s + g = s - ln(e) equals
ln 2 * (s / ln 2 - log2(e / ln 2)) - ln(ln 2), so argmax(s + g) is the argmax of
logit * (1.4426950408889634 / T) - log2(e / ln 2): the same draw, the scale folded into
the temperature. ``FAST_LOG`` selects the hardware ``lg2.approx`` instruction (compiled
kernels) or ``tl.log2`` (Triton's interpreter).
"""
# Triton reads the kernels' signatures itself; they carry no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import triton
import triton.language as tl

# Constants are written out where used: a module-level tl.constexpr costs a comparison at
# every launch (Triton checks that the globals a kernel used have not changed).
# -log1p(-u) / ln 2 = sum u**i / (i ln 2): below u = 2**-6 the kernels take its first four
# terms (negated: -1.4426950408889634, -0.7213475204444817, -0.48089834696298783,
# -0.36067376022224085); the next is < 2**-24 of the sum.

# Kernel arguments that may be a Python scalar: never specialise on their values.
_PARAMS = ["seeds", "steps", "temps", "top_ks", "top_ps", "min_ps"]


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
def _key_words(seed, step):
    """The row's Philox key words and step words (uint32 scalars) from int64 seed and step."""
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    s0 = (step & 0xFFFFFFFF).to(tl.uint32)
    s1 = ((step >> 32) & 0xFFFFFFFF).to(tl.uint32)
    return k0, k1, s0, s1


@triton.jit
def _group_bits(groups, seed, step, stream):
    """uint32 words [4 G] of tokens 4 * groups[0] ... 4 * groups[-1] + 3 (groups consecutive).

    One Philox call per group; tl.join keeps a group's 4 words in one thread, so no
    thread repeats another's Philox call.
    """
    k0, k1, s0, s1 = _key_words(seed, step)
    c0 = groups.to(tl.uint32)
    zero = tl.zeros_like(c0)
    w0, w1, w2, w3 = _philox(c0, zero + s0, zero + s1, zero + stream, zero + k0, zero + k1)
    both = tl.join(tl.join(w0, w2), tl.join(w1, w3))  # the new axis is the minor one
    return tl.reshape(both, [4 * groups.shape[0]])


@triton.jit
def _token_bits(ids, k0, k1, s0, s1):
    """uint32 word of each token id in ``ids`` (any shape), keyed by the row's ``_key_words``:
    one Philox call per id."""
    c0 = (ids // 4).to(tl.uint32)
    zero = tl.zeros_like(c0)
    w0, w1, w2, w3 = _philox(c0, zero + s0, zero + s1, zero, zero + k0, zero + k1)
    q = ids % 4
    return tl.where(q == 0, w0, tl.where(q == 1, w1, tl.where(q == 2, w2, w3)))


@triton.jit
def _log2(x, NEG: tl.constexpr, FAST_LOG: tl.constexpr):
    """log2(x), or log2(-x) when NEG."""
    if FAST_LOG:
        # The multi-function unit's log2 (absolute error about 2**-22; ftz: no input here is
        # denormal, w and e are >= 2**-33): one instruction, where tl.log / tl.log2 call
        # libdevice's accurate logf (about 20). The negation folds into its operand.
        y = tl.inline_asm_elementwise(
            "{ .reg .f32 t; neg.f32 t, $1; lg2.approx.ftz.f32 $0, t; }"
            if NEG
            else "lg2.approx.ftz.f32 $0, $1;",
            "=r,r",
            [x],
            dtype=tl.float32,
            is_pure=True,
            pack=1,
        )
    else:
        y = tl.log2(-x if NEG else x)
    return y


@triton.jit
def _gumbel2(x, FAST_LOG: tl.constexpr):
    """g / ln 2 - log2(ln 2) = -log2(-log1p(-u) / ln 2), u = (x + 0.5) * 2**-32, float32.

    -log1p(-u) / ln 2 comes from its series where u < 2**-6 (the tokens whose noise is
    large, that is the likely winners) and as -log2(1 - u) with 1 - u formed from ~x
    elsewhere, so no u rounds to 1 and no accurate log1p is needed. Adding a constant and
    scaling by 1 / ln 2 change no argmax.
    """
    u = x.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10  # (x + .5) / 2**32
    neg_series = u * (
        ((u * -0.36067376022224085 + -0.48089834696298783) * u + -0.7213475204444817) * u
        + -1.4426950408889634
    )
    w = (x ^ 0xFFFFFFFF).to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10
    neg_e = tl.where(u < 0.015625, neg_series, _log2(w, False, FAST_LOG))
    return -_log2(neg_e, True, FAST_LOG)


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
