"""GPU sampler benchmark: the Triton per-row Philox sampler against the usual ways.

Run on a CUDA machine: ``python -m bench.sampler_gpu`` (``--sweep`` also times a few
launch configurations of ours). Prints one table, times in microseconds, medians of
``triton.testing.do_bench`` (warm-up first; it overwrites a 256 MB buffer before every
timed call, so no input sits in L2):

* ``graph``: one call captured in a CUDA graph, the graph replayed: device time, launch
  gaps between the call's kernels included, no Python. An engine that captures its decode
  step (sampling included) pays this.
* ``rot``: a CUDA graph of back-to-back calls over input copies that together exceed L2
  several times (no flush), time per call. Unlike ``graph`` it leaves no dirty lines in L2
  for the call to write back: do_bench's flush writes 256 MB of zeros, so up to 60 MB of
  them must go back to memory while the timed call reads, roughly 15 us at B = 256 that
  no contender's own work causes. The floor (one read of the logits) is the like of this
  figure, so the ratios to the floor are given for both.
* ``eager``: the plain Python call, inputs rotating over the copies. The Python launch
  cost shows here only where it exceeds what the GPU has queued (the L2 flush before each
  call hides up to its own length, roughly 60 us).
* ``host``: CPU time of one eager call of ours (mean over 200 calls enqueued back to
  back, no synchronisation inside): what each decode step costs the engine's Python.
"""
# Every lambda below is called at once by _time, inside its loop iteration.
# ruff: noqa: B023
# The Triton kernel's signature carries no Python type hints.
# mypy: disable-error-code="no-untyped-def, untyped-decorator"

from __future__ import annotations

import argparse
import math
import time
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
    """Eager: median us of fn(i), i counting up (callers rotate their inputs by it)."""
    state = {"i": 0}

    def call() -> None:
        state["i"] += 1
        fn(state["i"])

    return float(do_bench(call, warmup=25, rep=200, return_mode="median")) * 1e3


def _captured(run: Callable[[], Any], warmups: int) -> Any:
    """A CUDA graph of run(), replayed once; None (said on stdout) if run cannot be captured.
    The warm-up calls compile, and let the allocator settle, before capture."""
    for _ in range(warmups):
        run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            run()
    except Exception as exc:  # report and carry on: the table shows n/a
        print(f"  (not capturable: {type(exc).__name__}: {str(exc)[:80]})")
        torch.cuda.synchronize()
        return None
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _time_graph(fn: Callable[[], Any]) -> float:
    """Graph: median us of replaying one captured call of fn; NaN if fn cannot be captured."""
    graph = _captured(fn, warmups=3)
    if graph is None:
        return math.nan
    us = float(do_bench(graph.replay, warmup=25, rep=200, return_mode="median")) * 1e3
    del graph
    return us


def _event() -> Any:
    event: Any = torch.cuda.Event  # untyped in torch: keep mypy --strict quiet either way
    return event(enable_timing=True)


def _time_rotating(fn: Callable[[int], Any], copies: int) -> float:
    """Rot: median us per call of a graph of fn(0) ... fn(copies - 1), back to back."""

    def all_copies() -> None:
        for i in range(copies):
            fn(i)

    graph = _captured(all_copies, warmups=1)
    if graph is None:
        return math.nan
    times = []
    for _ in range(15):
        start, end = _event(), _event()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / copies)
    del graph
    return float(sorted(times)[len(times) // 2])


def _host(fn: Callable[[int], Any], calls: int = 200) -> float:
    """Mean CPU us of one call, calls enqueued back to back (the GPU may lag behind)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    took = time.perf_counter() - start
    torch.cuda.synchronize()
    return took / calls * 1e6


def _inputs(rows: int, dtype: torch.dtype) -> list[torch.Tensor]:
    one = rows * VOCAB * torch.finfo(dtype).bits // 8
    copies = max(1, -(-_ROTATE_BYTES // one))
    copies = min(copies, 1024)  # B = 1: ~300 MB of copies, several times the L2
    return [(torch.randn(rows, VOCAB, device="cuda") * 3).to(dtype) for _ in range(copies)]


HEAD = (
    "dtype",
    "B",
    "mode",
    "floor",
    "argmax g",
    "argmax r",
    "multinom e",
    "multinom g",
    "gen-loop e",
    "tl.rand e",
    "tl.rand g",
    "tl.rand r",
    "ours e",
    "ours g",
    "ours r",
    "ours host",
    "ours/floor g",
    "ours/floor r",
    "rand/ours g",
    "rand/ours r",
)


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", action="store_true", help="also time launch configs")
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    parser.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"])
    parser.add_argument("--no-baselines", action="store_true", help="time ours and argmax only")
    parser.add_argument("--profile-host", action="store_true", help="cProfile eager calls (B=1)")
    args = parser.parse_args(argv)
    bw = _copy_bandwidth()
    print(
        f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
        f"triton {triton.__version__}  copy bandwidth {bw / 1e12:.2f} TB/s (read + write)"
    )
    print(f"V = {VOCAB}, T = {TEMP}; filtered = top-k {TOP_K} + top-p {TOP_P}; times in us")
    print(
        "e = eager, g = CUDA graph replay after an L2 flush, r = graph of back-to-back calls "
        "on rotating inputs (no flush), host = CPU us per eager call"
    )
    nan = math.nan
    rows_out: list[tuple[str, ...]] = [HEAD]
    for dtype in (getattr(torch, d) for d in args.dtypes):
        for rows in args.batches:
            xs = _inputs(rows, dtype)
            n = len(xs)
            x0 = xs[0]
            seeds = torch.randint(-(2**62), 2**62, (rows,), device="cuda")
            steps = torch.randint(0, 1000, (rows,), device="cuda")
            gens = [torch.Generator(device="cuda").manual_seed(i) for i in range(rows)]
            floor = rows * VOCAB * x0.element_size() / bw * 1e6
            argmax_g = _time_graph(lambda: x0.argmax(-1))
            argmax_r = _time_rotating(lambda i: xs[i].argmax(-1), n)
            for mode in ("temp", "filtered"):
                filtered = mode == "filtered"
                kw: dict[str, Any] = {"temperature": TEMP}
                if filtered:
                    kw.update(top_k=TOP_K, top_p=TOP_P)
                multi_e = multi_g = loop = rand_e = rand_g = rand_r = nan
                if not args.no_baselines:
                    multi_e = _time(lambda i: multinomial(xs[i % n], filtered))
                    multi_g = _time_graph(lambda: multinomial(x0, filtered))
                    loop = _time(lambda i: generator_loop(xs[i % n], gens, filtered))
                    if not filtered:
                        rand_e = _time(lambda i: rand_gumbel(xs[i % n], seeds, TEMP))
                        rand_g = _time_graph(lambda: rand_gumbel(x0, seeds, TEMP))
                        rand_r = _time_rotating(lambda i: rand_gumbel(xs[i], seeds, TEMP), n)
                ours_e = _time(lambda i: ts.sample(xs[i % n], seeds=seeds, steps=steps, **kw))
                ours_g = _time_graph(lambda: ts.sample(x0, seeds=seeds, steps=steps, **kw))
                ours_r = _time_rotating(
                    lambda i: ts.sample(xs[i], seeds=seeds, steps=steps, **kw), n
                )
                host = _host(lambda i: ts.sample(xs[i % n], seeds=seeds, steps=steps, **kw))
                rows_out.append(
                    (
                        str(dtype).removeprefix("torch."),
                        str(rows),
                        mode,
                        f"{floor:.1f}",
                        f"{argmax_g:.1f}",
                        f"{argmax_r:.1f}",
                        f"{multi_e:.1f}",
                        f"{multi_g:.1f}",
                        f"{loop:.1f}",
                        f"{rand_e:.1f}",
                        f"{rand_g:.1f}",
                        f"{rand_r:.1f}",
                        f"{ours_e:.1f}",
                        f"{ours_g:.1f}",
                        f"{ours_r:.1f}",
                        f"{host:.1f}",
                        f"{ours_g / floor:.2f}",
                        f"{ours_r / floor:.2f}",
                        f"{rand_g / ours_g:.2f}",
                        f"{rand_r / ours_r:.2f}",
                    )
                )
                print("  " + "  ".join(rows_out[-1]), flush=True)
            if args.sweep and rows == max(args.batches) and dtype == torch.float32:
                _sweep(xs, seeds, steps, floor)
            xs.clear()
            torch.cuda.empty_cache()
    _print_table(rows_out)
    if args.profile_host:
        _profile_host()


def _profile_host() -> None:
    """Where the CPU time of an eager call goes (B = 1, so the GPU never holds it up)."""
    import cProfile
    import pstats

    x = torch.randn(1, VOCAB, device="cuda")
    seeds = torch.zeros(1, dtype=torch.int64, device="cuda")
    for _ in range(10):
        ts.sample(x, seeds=seeds, steps=seeds, temperature=TEMP, top_k=TOP_K, top_p=TOP_P)
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        ts.sample(x, seeds=seeds, steps=seeds, temperature=TEMP, top_k=TOP_K, top_p=TOP_P)
    prof.disable()
    torch.cuda.synchronize()
    print("host profile, 500 eager calls (B = 1):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def _sweep(xs: list[torch.Tensor], seeds: torch.Tensor, steps: torch.Tensor, floor: float) -> None:
    n = len(xs)
    configs = [
        ts.DEFAULT_CONFIG,
        ts.KernelConfig(slice_warps=4),
        ts.KernelConfig(slice_size=16384),
        ts.KernelConfig(group_width=32, group_chunk=64),
    ]
    for cfg in configs:
        for name, kw in (
            ("temp", {"temperature": TEMP}),
            ("filtered", {"temperature": TEMP, "top_k": TOP_K, "top_p": TOP_P}),
        ):
            g = _time_graph(lambda: ts.sample(xs[0], seeds=seeds, steps=steps, config=cfg, **kw))
            r = _time_rotating(
                lambda i: ts.sample(xs[i], seeds=seeds, steps=steps, config=cfg, **kw), n
            )
            print(
                f"sweep {name} {cfg}: graph {g:.1f} us ({g / floor:.2f}x floor), "
                f"rot {r:.1f} us ({r / floor:.2f}x)",
                flush=True,
            )


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
