"""The per-row random stream: which Philox counter and key give the noise of each token.

The contract (sampler/README.md repeats it; the GPU kernel reproduces it bit for bit):

- key = the row's seed as a signed 64-bit integer read as uint64 (two's complement);
  key word 0 = low 32 bits, word 1 = high 32 bits.
- token id t in [0, V) takes output word t % 4 of
  philox4x32_10(counter=(t // 4, step & 0xffffffff, step >> 32, stream), key).
- stream 0 is sampling; counter word 3 is kept as a stream id for other uses.
- u = (x + 0.5) * 2**-32 in float64 (never 0 or 1); Gumbel g = -log(-log1p(-u)).
"""

from __future__ import annotations

import secrets

import numpy as np
import numpy.typing as npt

from sampler.philox import philox4x32_10

__all__ = [
    "SAMPLING_STREAM",
    "batch_bits",
    "gumbel",
    "random_seed",
    "row_bits",
    "token_bits",
    "uniform",
]

SAMPLING_STREAM = 0
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_UINT32_MAX = 2**32 - 1


def random_seed() -> int:
    """A random signed 64-bit seed, for rows admitted without a user seed."""
    return secrets.randbits(64) + _INT64_MIN


def row_bits(
    seed: int, step: int, vocab_size: int, stream: int = SAMPLING_STREAM
) -> npt.NDArray[np.uint32]:
    """The uint32 word of every token id [0, vocab_size) for one row at one step."""
    bits: npt.NDArray[np.uint32] = batch_bits([seed], [step], vocab_size, stream=stream)[0]
    return bits


def batch_bits(
    seeds: npt.ArrayLike,
    steps: npt.ArrayLike,
    vocab_size: int,
    *,
    stream: int = SAMPLING_STREAM,
) -> npt.NDArray[np.uint32]:
    """``row_bits`` for B rows at once: uint32 [B, vocab_size]."""
    key, step64 = _keys_and_steps(seeds, steps)
    if vocab_size < 0:
        raise ValueError("vocab_size must be >= 0")
    rows = key.shape[0]
    blocks = -(-vocab_size // 4)
    counter = np.empty((rows, blocks, 4), dtype=np.uint32)
    counter[:, :, 0] = np.arange(blocks, dtype=np.uint32)
    counter[:, :, 1] = (step64 & np.uint64(_UINT32_MAX))[:, None]
    counter[:, :, 2] = (step64 >> np.uint64(32))[:, None]
    counter[:, :, 3] = _check_stream(stream)
    words = philox4x32_10(counter, key[:, None, :])
    bits: npt.NDArray[np.uint32] = words.reshape(rows, blocks * 4)[:, :vocab_size]
    return bits


def token_bits(
    seeds: npt.ArrayLike,
    steps: npt.ArrayLike,
    token_ids: npt.ArrayLike,
    *,
    stream: int = SAMPLING_STREAM,
) -> npt.NDArray[np.uint32]:
    """The word of each (seed, step, token id) triple, for sparse draws over kept tokens."""
    key, step64 = _keys_and_steps(seeds, steps)
    tokens = np.asarray(token_ids, dtype=np.int64)
    if tokens.shape != step64.shape:
        raise ValueError("token_ids must have the same length as seeds and steps")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 4 * 2**32):
        raise ValueError("token ids must lie in [0, 2**34)")
    counter = np.empty((tokens.shape[0], 4), dtype=np.uint32)
    counter[:, 0] = tokens // 4
    counter[:, 1] = step64 & np.uint64(_UINT32_MAX)
    counter[:, 2] = step64 >> np.uint64(32)
    counter[:, 3] = _check_stream(stream)
    words = philox4x32_10(counter, key)
    picked: npt.NDArray[np.uint32] = words[np.arange(tokens.shape[0]), tokens % 4]
    return picked


def _keys_and_steps(
    seeds: npt.ArrayLike, steps: npt.ArrayLike
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint64]]:
    seed_arr = _as_int64(seeds, "seeds", _INT64_MIN, _INT64_MAX)
    step_arr = _as_int64(steps, "steps", 0, _INT64_MAX)
    if seed_arr.shape != step_arr.shape or seed_arr.ndim != 1:
        raise ValueError("seeds and steps must be 1-D and of the same length")
    key64 = seed_arr.view(np.uint64)  # two's complement: -1 -> 0xffffffffffffffff
    key = np.empty((seed_arr.shape[0], 2), dtype=np.uint32)
    key[:, 0] = key64 & np.uint64(_UINT32_MAX)
    key[:, 1] = key64 >> np.uint64(32)
    return key, step_arr.view(np.uint64)


def _check_stream(stream: int) -> int:
    if not 0 <= stream <= _UINT32_MAX:
        raise ValueError("stream must lie in [0, 2**32)")
    return stream


def uniform(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.float64]:
    """Map uint32 words to float64 uniforms in (0, 1): (x + 0.5) * 2**-32."""
    return (bits.astype(np.float64) + 0.5) * 2.0**-32


def gumbel(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.float64]:
    """Standard Gumbel noise from uint32 words: -log(-log1p(-u))."""
    u = uniform(bits)
    return -np.log(-np.log1p(-u))


def _as_int64(value: npt.ArrayLike, name: str, low: int, high: int) -> npt.NDArray[np.int64]:
    arr = np.asarray(value)
    if arr.dtype == np.int64:
        if arr.size and arr.min() < low:
            raise ValueError(f"{name} must be >= {low}")
        return arr
    if arr.dtype.kind == "O" or arr.dtype == np.uint64:
        # Python ints beyond int64, or uint64 arrays: check the range before casting.
        items = [int(v) for v in arr.ravel()]
        if any(not low <= v <= high for v in items):
            raise ValueError(f"{name} must lie in [{low}, {high}]")
        return np.array(items, dtype=np.int64).reshape(arr.shape)
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{name} must be integers, got {arr.dtype}")
    out = arr.astype(np.int64)
    if out.size and out.min() < low:
        raise ValueError(f"{name} must be >= {low}")
    return out
