"""GPU sampler benchmark: the Triton per-row Philox sampler against the usual ways.

Run on a CUDA machine: ``python -m bench.sampler_gpu`` (``--sweep`` also times a few
launch configurations of ours). Prints one table, times in microseconds (median of
``triton.testing.do_bench``, warm-up first; inputs rotate over enough copies that they
do not sit in L2).
"""
# Every lambda below is called at once by _time, inside its loop iteration.
# ruff: noqa: B023
# The Triton kernel's signature carries no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from sampler import triton_sampler as ts

VOCAB = 151_936
BATCHES = (1, 32, 128, 256)
TOP_K, TOP_P, TEMP = 50, 0.9, 0.8
_ROTATE_BYTES = 512 * 2**20


@triton.jit
def _rand_gumbel_kernel(
    logits_ptr, vocab, seeds_ptr, inv_t, part_val_ptr, part_idx_ptr, n_slices, SLICE: tl.constexpr
):
    """The per-element baseline: one tl.rand (a whole Philox call) per token."""
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    offs = part * SLICE + tl.arange(0, SLICE)
    valid = offs < vocab
    logit = tl.load(logits_ptr + row * vocab + offs, mask=valid, other=float("-inf"))
    u = tl.rand(tl.load(seeds_ptr + row), offs)
    g = -tl.log(-tl.log(tl.maximum(u, 1e-10)))
    score = tl.where(valid, logit.to(tl.float32) * inv_t + g, float("-inf"))
    best = tl.argmax(score, 0)
    tl.store(part_val_ptr + row * n_slices + part, tl.max(score, 0))
    tl.store(part_idx_ptr + row * n_slices + part, part * SLICE + best)


def rand_gumbel(logits: torch.Tensor, seeds: torch.Tensor, temp: float) -> torch.Tensor:
    rows, vocab = logits.shape
    slice_size = 2048
    n = triton.cdiv(vocab, slice_size)
    val = torch.empty((rows, n), device=logits.device, dtype=torch.float32)
    idx = torch.empty((rows, n), device=logits.device, dtype=torch.int32)
    _rand_gumbel_kernel[(rows, n)](
        logits, vocab, seeds, 1.0 / temp, val, idx, n, SLICE=slice_size, num_warps=8
    )
    return idx.gather(1, val.argmax(1, keepdim=True)).squeeze(1)


def _filter(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """What a naive engine does: top-k by torch.topk, then a sorted cumulative top-p."""
    vals, ids = torch.topk(logits.float() / TEMP, top_k, dim=-1)
    probs = torch.softmax(vals, dim=-1)
    before = probs.cumsum(-1) - probs
    vals = vals.masked_fill(before >= top_p, float("-inf"))
    return torch.full_like(logits, float("-inf"), dtype=torch.float32).scatter(-1, ids, vals)


def multinomial(logits: torch.Tensor, filtered: bool) -> torch.Tensor:
    s = _filter(logits, TOP_K, TOP_P) if filtered else logits.float() / TEMP
    return torch.multinomial(torch.softmax(s, dim=-1), 1).squeeze(1)


def generator_loop(
    logits: torch.Tensor, gens: list[torch.Generator], filtered: bool
) -> torch.Tensor:
    s = _filter(logits, TOP_K, TOP_P) if filtered else logits.float() / TEMP
    out = []
    for i, gen in enumerate(gens):
        q = torch.empty_like(s[i]).exponential_(generator=gen)
        out.append((s[i] - q.log()).argmax())
    return torch.stack(out)


def _copy_bandwidth() -> float:
    """Bytes moved (read + written) per second by a large device-to-device copy."""
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    src.random_()
    dst = torch.empty_like(src)
    ms = float(do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median"))
    return float(2 * src.numel() / (ms * 1e-3))


def _time(fn: Callable[[int], Any]) -> float:
    state = {"i": 0}

    def call() -> None:
        state["i"] += 1
        fn(state["i"])

    return float(do_bench(call, warmup=25, rep=200, return_mode="median")) * 1e3


def _inputs(rows: int, dtype: torch.dtype) -> list[torch.Tensor]:
    one = rows * VOCAB * torch.finfo(dtype).bits // 8
    copies = max(1, -(-_ROTATE_BYTES // one))
    copies = min(copies, 64)
    return [(torch.randn(rows, VOCAB, device="cuda") * 3).to(dtype) for _ in range(copies)]


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", action="store_true", help="also time launch configs")
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    args = parser.parse_args(argv)
    bw = _copy_bandwidth()
    print(
        f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
        f"triton {triton.__version__}  copy bandwidth {bw / 1e12:.2f} TB/s (read + write)"
    )
    print(f"V = {VOCAB}, T = {TEMP}; filtered = top-k {TOP_K} + top-p {TOP_P}; times in us")
    head = (
        "dtype",
        "B",
        "mode",
        "floor",
        "argmax",
        "multinom",
        "gen-loop",
        "tl.rand",
        "ours",
        "ours/floor",
        "rand/ours",
    )
    rows_out: list[tuple[str, ...]] = [head]
    for dtype in (torch.float32, torch.bfloat16):
        for rows in args.batches:
            xs = _inputs(rows, dtype)
            n = len(xs)
            seeds = torch.randint(-(2**62), 2**62, (rows,), device="cuda")
            steps = torch.randint(0, 1000, (rows,), device="cuda")
            gens = [torch.Generator(device="cuda").manual_seed(i) for i in range(rows)]
            floor = rows * VOCAB * xs[0].element_size() / bw * 1e6
            argmax = _time(lambda i: xs[i % n].argmax(-1))
            for mode in ("temp", "filtered"):
                filtered = mode == "filtered"
                kw: dict[str, Any] = {"temperature": TEMP}
                if filtered:
                    kw.update(top_k=TOP_K, top_p=TOP_P)
                multi = _time(lambda i: multinomial(xs[i % n], filtered))
                loop = _time(lambda i: generator_loop(xs[i % n], gens, filtered))
                rand = (
                    float("nan")
                    if filtered
                    else _time(lambda i: rand_gumbel(xs[i % n], seeds, TEMP))
                )
                ours = _time(lambda i: ts.sample(xs[i % n], seeds=seeds, steps=steps, **kw))
                rows_out.append(
                    (
                        str(dtype).removeprefix("torch."),
                        str(rows),
                        mode,
                        f"{floor:.1f}",
                        f"{argmax:.1f}",
                        f"{multi:.1f}",
                        f"{loop:.1f}",
                        f"{rand:.1f}",
                        f"{ours:.1f}",
                        f"{ours / floor:.2f}",
                        f"{rand / ours:.2f}",
                    )
                )
            if args.sweep and rows == max(args.batches) and dtype == torch.float32:
                _sweep(xs, seeds, steps, floor)
    _print_table(rows_out)


def _sweep(xs: list[torch.Tensor], seeds: torch.Tensor, steps: torch.Tensor, floor: float) -> None:
    n = len(xs)
    configs = [
        ts.DEFAULT_CONFIG,
        ts.KernelConfig(slice_warps=4),
        ts.KernelConfig(slice_size=16384, slice_warps=8),
        ts.KernelConfig(groups=256, slice_warps=4),
        ts.KernelConfig(lanes=1024, row_warps=4),
        ts.KernelConfig(lanes=1024, row_warps=2, cap=256, k_fast=64),
        ts.KernelConfig(lanes=2048, row_warps=8),
    ]
    for cfg in configs:
        t = _time(
            lambda i: ts.sample(xs[i % n], seeds=seeds, steps=steps, temperature=TEMP, config=cfg)
        )
        f = _time(
            lambda i: ts.sample(
                xs[i % n],
                seeds=seeds,
                steps=steps,
                temperature=TEMP,
                top_k=TOP_K,
                top_p=TOP_P,
                config=cfg,
            )
        )
        print(
            f"sweep {cfg}: temp {t:.1f} us ({t / floor:.2f}x floor), "
            f"filtered {f:.1f} us ({f / floor:.2f}x floor)"
        )


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
