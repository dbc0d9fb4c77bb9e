"""Per-request cost of the metrics and access-log observers, without HTTP.

Run: ``python -m bench.observer_cost`` (what ``scripts/observer-cost`` calls). Each case
times ``started`` then ``finished`` on N ready-made exchanges (a streamed chat completion
with two policy outcomes) and prints the best of several runs, in microseconds per request.
The access logs write to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import BinaryIO

from gateway.observe.exchange import Exchange, Observer, Observers
from gateway.observe.logs import AccessLog
from gateway.observe.metrics import Metrics
from gateway.policy.engine import Outcome

N = 100_000
RUNS = 5


def exchanges(n: int) -> list[Exchange]:
    """``n`` finished-looking exchanges: a streamed chat completion, two policy outcomes."""
    out = []
    for _ in range(n):
        e = Exchange(
            "POST",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "e18993c3950b4273a4994f887630fc44",
            model="Qwen3.8-Flash-Next",
            status=200,
            stream=True,
            upstream_status=200,
            bytes_out=4000,
        )
        e.outcomes = [Outcome("user", "stripped"), Outcome("n", "neutral")]
        e.upstream_started = time.perf_counter()
        e.first_byte = e.upstream_started + 0.01
        out.append(e)
    return out


def cases(devnull: BinaryIO) -> dict[str, Callable[[], Observer]]:
    """Label -> a factory of a fresh observer for each run."""
    return {
        "metrics": Metrics,
        "access log, json, to /dev/null": lambda: AccessLog(devnull),
        "access log, text, to /dev/null": lambda: AccessLog(devnull, format="text"),
        "metrics + json access log": lambda: Observers(Metrics(), AccessLog(devnull)),
    }


def best_seconds(make: Callable[[], Observer], n: int, runs: int) -> float:
    """The fastest of ``runs`` runs over ``n`` exchanges, in seconds (each run: a new
    observer and new exchanges, made before the clock starts)."""
    best = float("inf")
    for _ in range(runs):
        obs, exs = make(), exchanges(n)
        t = time.perf_counter()
        for e in exs:
            obs.started(e)
            obs.finished(e)
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> None:
    """Print one line per case: ``LABEL: X.XX us per request``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=N, help=f"requests per run (default {N})")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per case (default {RUNS})")
    args = parser.parse_args(argv)
    if args.n < 1 or args.runs < 1:
        parser.error("--n and --runs must be at least 1")
    with open(os.devnull, "wb") as devnull:
        for label, make in cases(devnull).items():
            best = best_seconds(make, args.n, args.runs)
            print(f"{label}: {best / args.n * 1e6:.2f} us per request")


if __name__ == "__main__":
    main()
