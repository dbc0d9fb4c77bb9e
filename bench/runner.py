"""Run every contender through every scenario, interleaved and repeated; print one table.

CPU 0 runs the fake engines, the load generators and this runner; CPU 1 runs
the proxy under test, alone. Each (scenario, contender) run starts a fresh
proxy, warms it up, then measures, so its peak RSS belongs to that run. Within a
round every contender runs each scenario back to back (in an order rotated
from round to round), which is what makes the per-round ratios fair.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import contenders as contenders_module
from bench import scenarios as scenarios_module
from bench.contenders import (
    ROOT,
    Contender,
    Launch,
    Running,
    running,
    start_process,
    stop_process,
    wait_ready,
)
from bench.procstat import cpu_seconds, memory_kib
from bench.results import Record, add_differences, summarize
from bench.scenarios import CHAT_BODY, HOLD_CHUNK_MS, PACED_CHUNK_MS, Engine, Scenario
from bench.table import format_table
from bench.wrk import lua_script, run_wrk

LOAD_CPU = 0
PROXY_CPU = 1
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of ``scripts/bench``."""
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description="Benchmark the gateway against nginx and a naive proxy."
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds per run (0: none)")
    parser.add_argument("--scenarios", help="comma list of names or prefixes, e.g. chat,paced")
    parser.add_argument("--contenders", help="comma list of direct,nginx,naive,gateway")
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


@contextlib.contextmanager
def _engines(workdir: Path, *, cpu: int | None) -> Iterator[dict[Engine, Running]]:
    delays: dict[Engine, float] = {"fast": 0.0, "paced": PACED_CHUNK_MS, "hold": HOLD_CHUNK_MS}
    started: dict[Engine, Running] = {}
    try:
        for name, delay in delays.items():
            port = free_port()
            command = [sys.executable, "-m", "bench.fake_engine", "--host", HOST]
            command += ["--port", str(port), "--chunk-delay-ms", str(delay)]
            process = start_process(command, env={}, cpu=cpu, log=workdir / f"engine-{name}.log")
            started[name] = Running(f"http://{HOST}:{port}", process)
            wait_ready(started[name].url, process=process, timeout=30)
        yield started
    finally:
        for engine in started.values():
            if engine.process is not None:
                stop_process(engine.process)


def _cpu(pid: int | None) -> float:
    return cpu_seconds(pid) if pid is not None else math.nan


def _peak_rss_mib(pid: int | None) -> float:
    return memory_kib(pid, "VmHWM") / 1024 if pid is not None else math.nan


class Bench:
    """One benchmark run: engines up, then runs recorded one by one."""

    def __init__(self, args: argparse.Namespace, workdir: Path, engines: dict[Engine, Running]):
        self.args = args
        self.workdir = workdir
        self.engines = engines
        self.load_cpu = None if args.no_pin else LOAD_CPU
        self.proxy_cpu = None if args.no_pin else PROXY_CPU

    def _script(self, body: bytes) -> Path:
        path = self.workdir / f"post-{hashlib.sha1(body).hexdigest()[:12]}.lua"
        if not path.exists():
            path.write_text(lua_script(body))
        return path

    def _warm_up(self, url: str, concurrency: int) -> None:
        if self.args.warmup > 0:
            script = self._script(CHAT_BODY)
            run_wrk(url, script=script, concurrency=concurrency, seconds=self.args.warmup)

    def run(self, scenario: Scenario, contender: Contender, round_: int) -> Record:
        """Start ``contender`` in front of the scenario's engine and measure one run."""
        engine = self.engines[scenario.engine]
        workdir = self.workdir / f"r{round_}-{scenario.name}-{contender.name}"
        launch = Launch(upstream=engine.url, host=HOST, port=free_port(), workdir=workdir)
        record: Record = {"round": round_, "scenario": scenario.name, "contender": contender.name}
        with running(contender, launch, cpu=self.proxy_cpu) as proxy:
            url = proxy.url + "/v1/chat/completions"
            if scenario.kind == "wrk":
                record.update(self._run_wrk(scenario, proxy, engine, url))
            elif scenario.kind == "paced":
                record.update(self._run_paced(scenario, proxy, url))
            else:
                record.update(self._run_hold(scenario, proxy, url))
        return record

    def _run_wrk(self, scenario: Scenario, proxy: Running, engine: Running, url: str) -> Record:
        script = self._script(scenario.body)
        self._warm_up(url, scenario.concurrency)
        cpu0, engine0 = _cpu(proxy.pid), _cpu(engine.pid)
        result = run_wrk(
            url,
            script=script,
            concurrency=scenario.concurrency,
            seconds=self.args.seconds,
            cpu=self.load_cpu,
        )
        cpu1, engine1 = _cpu(proxy.pid), _cpu(engine.pid)
        per_request = 1e6 / result.requests if result.requests else math.nan
        return {
            "rps": result.rps,
            "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms,
            "errors": result.errors,
            "requests": result.requests,
            "cpu_us": (cpu1 - cpu0) * per_request,
            "engine_cpu_us": (engine1 - engine0) * per_request,
            "peak_rss_mib": _peak_rss_mib(proxy.pid),
        }

    def _loadgen(self, *args: str) -> list[str]:
        command = [sys.executable, "-m", "bench.loadgen", *args]
        if self.load_cpu is not None:
            command = ["taskset", "-c", str(self.load_cpu), *command]
        return command

    def _run_paced(self, scenario: Scenario, proxy: Running, url: str) -> Record:
        self._warm_up(url, scenario.concurrency)
        cpu0 = _cpu(proxy.pid)
        command = self._loadgen("stream", url, "--concurrency", str(scenario.concurrency))
        command += ["--seconds", str(self.args.seconds)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
        cpu1 = _cpu(proxy.pid)
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        streams = int(result["streams"])
        record: Record = {k: v for k, v in result.items() if isinstance(v, int | float)}
        record["cpu_us"] = (cpu1 - cpu0) * 1e6 / streams if streams else math.nan
        record["peak_rss_mib"] = _peak_rss_mib(proxy.pid)
        return record

    def _run_hold(self, scenario: Scenario, proxy: Running, url: str) -> Record:
        if proxy.pid is None:
            return {}
        self._warm_up(url, 32)
        idle = memory_kib(proxy.pid, "VmRSS")
        streams = self.args.hold_streams
        command = self._loadgen("hold", url, "--streams", str(streams), "--open-timeout", "10")
        holder = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        if holder.stdin is None or holder.stdout is None:
            raise RuntimeError("loadgen hold started without pipes")
        line = holder.stdout.readline()
        opened = int(line.split()[1]) if line.startswith("open ") else 0
        held = 0
        for _ in range(5):
            held = max(held, memory_kib(proxy.pid, "VmRSS"))
            time.sleep(0.1)
        holder.stdin.close()
        holder.wait(timeout=60)
        return {
            "opened": opened,
            "idle_rss_mib": idle / 1024,
            "open_rss_mib": held / 1024,
            "kib_per_stream": (held - idle) / opened if opened else math.nan,
            "peak_rss_mib": _peak_rss_mib(proxy.pid),
        }


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
        with _engines(workdir, cpu=None if args.no_pin else LOAD_CPU) as engines:
            bench = Bench(args, workdir, engines)
            for round_ in range(args.rounds):
                for scenario in scenarios:
                    shift = round_ % len(contenders)
                    for contender in contenders[shift:] + contenders[:shift]:
                        if scenario.kind == "hold" and contender.command is None:
                            continue
                        run_started = time.monotonic()
                        record = bench.run(scenario, contender, round_)
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
