"""The Philox stream and its Gumbel noise, as Triton jit functions of the GPU sampler.

The words are the stream contract's (sampler/README.md), bit for bit: token t of a row at
``step`` is word t % 4 of Philox4x32-10 at counter (t // 4, step & 0xffffffff, step >> 32,
stream) under the key (low 32 bits, high 32 bits) of the seed read as uint64.
``_group_bits`` draws a tile's consecutive tokens (one Philox call per 4 of them),
``_token_bits`` any set of token ids.

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

# Constants are written out where used, as in sampler/_triton_kernels.py (a module-level
# tl.constexpr would cost a comparison at every launch).
# -log1p(-u) / ln 2 = sum u**i / (i ln 2): below u = 2**-6 the kernels take its first four
# terms (negated: -1.4426950408889634, -0.7213475204444817, -0.48089834696298783,
# -0.36067376022224085); the next is < 2**-24 of the sum.


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
