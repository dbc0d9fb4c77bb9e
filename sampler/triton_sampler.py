"""The per-row Philox sampler as Triton GPU kernels: a drop-in for an engine's sampling step.

Same contract as the CPU reference ``sampler.sample`` (sampler/README.md): per-row seeds
and steps key a Philox4x32-10 stream, filters are row-local, the draw is Gumbel-max.
Needs the ``[gpu]`` extra (torch, triton); ``import sampler`` never imports this module.

``sample`` never waits for the device (no ``.item()``, no data-dependent shapes) and builds
no per-call parameter tensors: a scalar parameter travels as a kernel argument, a tensor
parameter is read in place by the kernels. It is two kernel launches and two allocations,
so it can be captured in a CUDA graph.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import torch
import triton

from sampler import _triton_kernels as _k

__all__ = ["KernelConfig", "DEFAULT_CONFIG", "sample", "stream_bits"]

PerRow: TypeAlias = "torch.Tensor | Sequence[float] | float | int"
# A kernel argument for one per-row parameter: a tensor, or a scalar's int64 bits.
_Arg: TypeAlias = "torch.Tensor | int"

_LOGIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Triton's interpreter (TRITON_INTERPRET=1, used by CI) runs no PTX: tl.log2 stands in for
# the hardware lg2.approx there.
_FAST_LOG = os.environ.get("TRITON_INTERPRET", "0").lower() not in ("1", "true", "on", "yes")


@dataclass(frozen=True)
class KernelConfig:
    """Launch constants. None of them may depend on the batch size (batch invariance)."""

    slice_size: int = 8192  # tokens per program of the slice kernel
    groups: int = 512  # Philox groups (4 tokens each) per tile of an unfiltered row
    slice_warps: int = 8
    group_width: int = 64  # tokens per group maximum of a top-k row
    group_cap: int = 256  # most groups a top-k row's candidate pass reads again
    group_chunk: int = 32  # groups read again per step of that pass
    cap: int = 512  # most candidates a top-k row sorts
    k_fast: int = 128  # largest top_k served by the candidate path
    lanes: int = 2048  # tokens per step of the exact fallback's passes
    row_warps: int = 8


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

    Per-row parameters are scalars, or tensors of length B (or 0-d) of any integer
    (seeds, steps, top_k) or floating (temperature, top_p, min_p) dtype, read in place;
    their values are trusted (the engine validates requests), so nothing here waits for
    the device.
    """
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise ValueError(f"logits must have shape [B, V] with V >= 1, got {tuple(logits.shape)}")
    if logits.dtype not in _LOGIT_DTYPES:
        raise TypeError(f"logits must be float32, bfloat16 or float16, got {logits.dtype}")
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    rows, vocab = logits.shape
    dev = logits.device
    args: list[_Arg] = []
    modes = 0
    for i, (value, is_float, name) in enumerate(
        (
            (seeds, False, "seeds"),
            (steps, False, "steps"),
            (temperature, True, "temperature"),
            (top_k, False, "top_k"),
            (top_p, True, "top_p"),
            (min_p, True, "min_p"),
        )
    ):
        arg, mode = _param(value, rows, is_float, dev, name)
        args.append(arg)
        modes |= mode << (2 * i)
    out = torch.empty(rows, dtype=torch.int64, device=dev)
    if rows == 0:
        return out
    cfg = config
    n_slices = triton.cdiv(vocab, cfg.slice_size)
    slices_pow2 = triton.next_power_of_2(n_slices)
    groups_per_slice = cfg.slice_size // cfg.group_width
    ws_row = slices_pow2 + slices_pow2 * groups_per_slice // 2 + cfg.group_cap // 2 + cfg.cap
    ws = torch.empty(rows * ws_row, dtype=torch.int64, device=dev)
    _k.slice_kernel[(rows, n_slices)](
        logits,
        logits.stride(0),
        vocab,
        *args,
        ws,
        MODES=modes,
        SLICE=cfg.slice_size,
        GROUPS=cfg.groups,
        GW=cfg.group_width,
        SLICES_POW2=slices_pow2,
        WS_ROW=ws_row,
        K_FAST=cfg.k_fast,
        FAST_LOG=_FAST_LOG,
        num_warps=cfg.slice_warps,
    )
    _k.row_kernel[(rows,)](
        logits,
        logits.stride(0),
        vocab,
        *args,
        ws,
        out,
        n_slices,
        MODES=modes,
        SLICE=cfg.slice_size,
        GW=cfg.group_width,
        SLICES_POW2=slices_pow2,
        WS_ROW=ws_row,
        LANES=cfg.lanes,
        G_CAP=cfg.group_cap,
        G_CHUNK=cfg.group_chunk,
        CAP=cfg.cap,
        K_FAST=cfg.k_fast,
        GROUPS=cfg.groups,
        FAST_LOG=_FAST_LOG,
        num_warps=cfg.row_warps,
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


def _param(
    value: PerRow, rows: int, is_float: bool, device: torch.device, name: str
) -> tuple[_Arg, int]:
    """(kernel argument, mode): mode 0 a scalar (int64 bits of a float64 when is_float),
    1 a length-``rows`` tensor, 2 a one-element (0-d) tensor."""
    if isinstance(value, torch.Tensor):
        if value.ndim == 0:
            mode = 2
        elif value.shape == (rows,):
            mode = 1
        else:
            raise ValueError(f"{name} must be a scalar or have length {rows}")
        if value.is_floating_point() != is_float or value.is_complex() or value.dtype == torch.bool:
            value = value.to(torch.float64 if is_float else torch.int64)
        if value.device != device:
            value = value.to(device)
        if mode == 1 and value.stride(0) != 1:
            value = value.contiguous()
        return value, mode
    if isinstance(value, int | float):
        if is_float:
            bits: int = struct.unpack("<q", struct.pack("<d", float(value)))[0]
            return bits, 0
        if not -(2**63) <= int(value) < 2**63:
            raise ValueError(f"{name} must fit in int64, got {value}")
        return int(value), 0
    dtype = torch.float64 if is_float else torch.int64
    return _param(torch.tensor(value, dtype=dtype), rows, is_float, device, name)
