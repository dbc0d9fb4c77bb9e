"""Run every contender through every scenario, interleaved and repeated; print one table.

Within a round every contender runs each scenario back to back (in an order
rotated from round to round), which is what makes the per-round ratios fair.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import contenders as contenders_module
from bench import scenarios as scenarios_module
from bench.contenders import ROOT
from bench.harness import LOAD_CPU, Harness, Options, running_engines
from bench.results import Record, add_differences, summarize
from bench.table import format_table


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of ``scripts/bench``."""
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="The gateway beside nginx, Envoy, the Rust routers and a naive proxy.",
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds per run (0: none)")
    parser.add_argument("--scenarios", help="comma list of names or prefixes, e.g. chat,paced")
    parser.add_argument(
        "--contenders",
        help="comma list of direct,nginx,naive,envoy,vllm-router,smg,gateway (also: "
        "envoy-extproc, gateway-baseline, gateway-python, gateway-httpx, gateway-aiohttp, "
        "gateway-httptools)",
    )
    parser.add_argument("--hold-streams", type=int, default=1000, help="streams held open")
    parser.add_argument(
        "--quick", action="store_true", help="one round of 2 s runs: a smoke test, not figures"
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument(
        "--output", type=Path, default=ROOT / "bench" / "results", help="where the JSON goes"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 1, 2
    return args


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))


def _machine() -> dict[str, str]:
    def output(*command: str) -> str:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=10)
        except OSError:
            return "?"
        return (
            (done.stdout + done.stderr).strip().splitlines()[0]
            if done.stdout + done.stderr
            else "?"
        )

    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "cpus": str(os.cpu_count()),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "nginx": output("nginx", "-v"),
        "wrk": output("wrk", "--version"),
        "commit": output("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    args = parse_args(argv)
    scenarios = scenarios_module.select(args.scenarios.split(",") if args.scenarios else None)
    scenarios = [
        replace(s, concurrency=args.hold_streams) if s.kind == "hold" else s for s in scenarios
    ]
    contenders = contenders_module.select(args.contenders.split(",") if args.contenders else None)
    if (os.cpu_count() or 1) < 2:
        args.no_pin = True
    _raise_fd_limit()
    if not args.no_pin:
        os.sched_setaffinity(0, {LOAD_CPU})
    names = [c.name for c in contenders]
    for contender in contenders:
        if contender.prepare is not None:
            print(f"bench: installing {contender.name} (once per machine)", file=sys.stderr)
            contender.prepare()
    runs = sum(
        1 for s in scenarios for c in contenders if not (s.kind == "hold" and c.command is None)
    )
    print(
        f"bench: {args.rounds} round(s) x {runs} runs of {args.seconds} s; "
        f"contenders {', '.join(names)}",
        file=sys.stderr,
    )
    started = time.monotonic()
    records: list[Record] = []
    with tempfile.TemporaryDirectory(prefix="ft-bench-") as tmp:
        workdir = Path(tmp)
        options = Options(
            seconds=args.seconds,
            warmup=args.warmup,
            pin=not args.no_pin,
            honour_min_streams=not args.quick,
        )
        with running_engines(workdir, cpu=None if args.no_pin else LOAD_CPU) as engines:
            harness = Harness(options, workdir, engines)
            for round_ in range(args.rounds):
                for scenario in scenarios:
                    shift = round_ % len(contenders)
                    for contender in contenders[shift:] + contenders[:shift]:
                        if scenario.kind == "hold" and contender.command is None:
                            continue
                        run_started = time.monotonic()
                        record = harness.run(scenario, contender, round_)
                        record["run_seconds"] = time.monotonic() - run_started
                        records.append(record)
                        print(_progress(record), file=sys.stderr, flush=True)
    add_differences(records)
    rows = summarize(records, scenarios, names)
    table = format_table(rows, names)
    elapsed = time.monotonic() - started
    machine = _machine()
    print(
        f"\nft-gateway bench: {args.rounds} round(s), {args.seconds} s runs, medians; "
        f"ratios are medians of per-round ratios. {elapsed:.0f} s.\n"
        f"machine: {machine['cpus']} x {machine['cpu_model']}, Linux {machine['kernel']}, "
        f"Python {machine['python']}, commit {machine['commit']}\n"
    )
    print(table)
    args.output.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = args.output / f"bench-{stamp}.json"
    document = {
        "machine": machine,
        "args": {k: str(v) for k, v in vars(args).items()},
        "seconds_elapsed": elapsed,
        "records": records,
        "rows": [
            {**asdict(row), "ratios": {f"{c}/{r}": v for (c, r), v in row.ratios.items()}}
            for row in rows
        ],
        "table": table,
    }
    path.write_text(json.dumps(_no_nan(document), indent=1, default=str))
    print(f"\nresults: {path}")


def _no_nan(value: Any) -> Any:
    """JSON has no NaN: missing figures become null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def _progress(record: Record) -> str:
    shown = ("rps", "p50_ms", "p99_ms", "cpu_us", "ttfb_p50_ms", "gap_p99_ms", "kib_per_stream")
    figures = " ".join(
        f"{k}={v:.4g}" for k, v in record.items() if k in shown and isinstance(v, float | int)
    )
    return (
        f"  r{record['round']} {record['scenario']:<12} {record['contender']:<8} {figures}"
        f" ({record.get('run_seconds', 0):.1f} s)"
    )
