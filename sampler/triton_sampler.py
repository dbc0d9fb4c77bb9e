"""The per-row Philox sampler as Triton GPU kernels: a drop-in for an engine's sampling step.

Same contract as the CPU reference ``sampler.sample`` (sampler/README.md): per-row seeds
and steps key a Philox4x32-10 stream, filters are row-local, the draw is Gumbel-max.
Needs the ``[gpu]`` extra (torch, triton); ``import sampler`` never imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import torch
import triton

from sampler import _triton_kernels as _k

__all__ = ["KernelConfig", "DEFAULT_CONFIG", "sample", "stream_bits"]

PerRow: TypeAlias = "torch.Tensor | Sequence[float] | float | int"

_LOGIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class KernelConfig:
    """Launch constants. None of them may depend on the batch size (batch invariance)."""

    slice_size: int = 8192  # tokens per program of an unfiltered row
    groups: int = 512  # Philox groups (4 tokens each) per tile
    slice_warps: int = 8
    lanes: int = 2048  # tokens per step of a filtered row's passes
    cap: int = 512  # most candidates a filtered row's fast path sorts
    k_fast: int = 128  # largest top_k served by the fast path
    row_warps: int = 4


DEFAULT_CONFIG = KernelConfig()


def sample(
    logits: torch.Tensor,
    *,
    seeds: PerRow,
    steps: PerRow,
    temperature: PerRow = 1.0,
    top_k: PerRow = 0,
    top_p: PerRow = 1.0,
    min_p: PerRow = 0.0,
    config: KernelConfig = DEFAULT_CONFIG,
) -> torch.Tensor:
    """One token id per row of ``logits`` [B, V] (float32, bfloat16 or float16): int64 [B].

    Per-row parameters are scalars or tensors of length B; their values are trusted
    (the engine validates requests), so nothing here waits for the device.
    """
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise ValueError(f"logits must have shape [B, V] with V >= 1, got {tuple(logits.shape)}")
    if logits.dtype not in _LOGIT_DTYPES:
        raise TypeError(f"logits must be float32, bfloat16 or float16, got {logits.dtype}")
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    rows, vocab = logits.shape
    dev = logits.device
    seed_t = _per_row(seeds, rows, torch.int64, dev, "seeds")
    step_t = _per_row(steps, rows, torch.int64, dev, "steps")
    temp_t = _per_row(temperature, rows, torch.float64, dev, "temperature")
    k_t = _per_row(top_k, rows, torch.int64, dev, "top_k")
    p_t = _per_row(top_p, rows, torch.float64, dev, "top_p")
    m_t = _per_row(min_p, rows, torch.float64, dev, "min_p")
    out = torch.empty(rows, dtype=torch.int64, device=dev)
    if rows == 0:
        return out
    n_slices = triton.cdiv(vocab, config.slice_size)
    part_val = torch.empty((rows, n_slices), dtype=torch.float32, device=dev)
    part_idx = torch.empty((rows, n_slices), dtype=torch.int32, device=dev)
    scratch = torch.empty((rows, config.cap), dtype=torch.int64, device=dev)
    params = (seed_t, step_t, temp_t, k_t, p_t, m_t)
    _k.slice_kernel[(rows, n_slices)](
        logits,
        logits.stride(0),
        vocab,
        *params,
        part_val,
        part_idx,
        n_slices,
        SLICE=config.slice_size,
        GROUPS=config.groups,
        num_warps=config.slice_warps,
    )
    _k.row_kernel[(rows,)](
        logits,
        logits.stride(0),
        vocab,
        *params,
        part_val,
        part_idx,
        n_slices,
        scratch,
        out,
        SLICES_POW2=triton.next_power_of_2(n_slices),
        LANES=config.lanes,
        CAP=config.cap,
        K_FAST=config.k_fast,
        GROUPS=config.groups,
        num_warps=config.row_warps,
    )
    return out


def stream_bits(
    seeds: torch.Tensor, steps: torch.Tensor, vocab_size: int, *, stream: int = 0
) -> torch.Tensor:
    """Debug entry: the uint32 word of every token of every row (int64 [B, V], 0 <= x < 2**32),
    computed by the same tile code the sampling kernels use.
    """
    if seeds.ndim != 1 or seeds.shape != steps.shape:
        raise ValueError("seeds and steps must be 1-D and of the same length")
    if not 0 <= stream < 2**32:
        raise ValueError("stream must lie in [0, 2**32)")
    rows = seeds.shape[0]
    dev = seeds.device
    out = torch.empty((rows, vocab_size), dtype=torch.int32, device=dev)
    groups = DEFAULT_CONFIG.groups
    if rows and vocab_size:
        grid = (rows, triton.cdiv(vocab_size, 4 * groups))
        _k.bits_kernel[grid](
            out,
            vocab_size,
            seeds.to(torch.int64),
            steps.to(torch.int64),
            stream,
            GROUPS=groups,
        )
    return out.to(torch.int64) & 0xFFFFFFFF


def _per_row(
    value: PerRow, rows: int, dtype: torch.dtype, device: torch.device, name: str
) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.ndim == 0:
            return value.to(device=device, dtype=dtype).expand(rows).contiguous()
        if value.shape != (rows,):
            raise ValueError(f"{name} must be a scalar or have length {rows}")
        return value.to(device=device, dtype=dtype).contiguous()
    if isinstance(value, int | float):
        return torch.full((rows,), value, dtype=dtype, device=device)
    return _per_row(torch.tensor(value, dtype=dtype), rows, dtype, device, name)
