"""Measuring one contender in one scenario: start it, warm it up, load it, read /proc.

CPU 0 runs the fake engines, the load generators and the harness; CPU 1 runs
the proxy under test, alone. Each run starts a fresh proxy, so its peak RSS
belongs to that run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from bench.ports import HOST, free_port
from bench.procstat import cpu_seconds, cpu_seconds_by_command, cpu_seconds_precise, memory_kib
from bench.results import Record
from bench.scenarios import CHAT_BODY, HOLD_CHUNK_MS, PACED_CHUNK_MS, Engine, Scenario
from bench.wrk import lua_script, run_wrk

LOAD_CPU = 0
PROXY_CPU = 1


@dataclass(frozen=True)
class Options:
    """How long each run lasts, and whether processes are pinned."""

    seconds: int = 5
    warmup: int = 1
    pin: bool = True
    # Paced scenarios time at least this many streams per client (the "quick" mode: 1).
    honour_min_streams: bool = True


@contextlib.contextmanager
def running_engines(workdir: Path, *, cpu: int | None) -> Iterator[dict[Engine, Running]]:
    """The three fake engines (no delay, paced, held), each in its own process."""
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


def _cpu(pid: int | None) -> tuple[float, float]:
    """CPU seconds of a process tree: (nanosecond schedstat, clock-tick stat)."""
    if pid is None:
        return math.nan, math.nan
    return cpu_seconds_precise(pid), cpu_seconds(pid)


def _peak_rss_mib(pid: int | None) -> float:
    return memory_kib(pid, "VmHWM") / 1024 if pid is not None else math.nan


class Harness:
    """Runs one contender through one scenario at a time, against engines already up."""

    def __init__(self, options: Options, workdir: Path, engines: dict[Engine, Running]):
        self.options = options
        self.workdir = workdir
        self.engines = engines
        self.load_cpu = LOAD_CPU if options.pin else None
        self.proxy_cpu = PROXY_CPU if options.pin else None

    def _script(self, body: bytes) -> Path:
        path = self.workdir / f"post-{hashlib.sha1(body).hexdigest()[:12]}.lua"
        if not path.exists():
            path.write_text(lua_script(body))
        return path

    def _warm_up(self, url: str, concurrency: int) -> None:
        if self.options.warmup > 0:
            script = self._script(CHAT_BODY)
            run_wrk(url, script=script, concurrency=concurrency, seconds=self.options.warmup)

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
        parts0 = cpu_seconds_by_command(proxy.pid) if proxy.pid is not None else {}
        result = run_wrk(
            url,
            script=script,
            concurrency=scenario.concurrency,
            seconds=self.options.seconds,
            cpu=self.load_cpu,
        )
        cpu1, engine1 = _cpu(proxy.pid), _cpu(engine.pid)
        parts1 = cpu_seconds_by_command(proxy.pid) if proxy.pid is not None else {}
        per_request = 1e6 / result.requests if result.requests else math.nan
        # A proxy of several programs (Envoy and its processor): each one's share, as
        # cpu_us_of_envoy, cpu_us_of_ft-gateway (by /proc/PID/comm), in the JSON only.
        shares: Record = {
            f"cpu_us_of_{name}": (spent - parts0.get(name, 0.0)) * per_request
            for name, spent in parts1.items()
        }
        return {
            **shares,
            "rps": result.rps,
            "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms,
            "errors": result.errors,
            "requests": result.requests,
            "cpu_us": (cpu1[0] - cpu0[0]) * per_request,
            "cpu_us_stat": (cpu1[1] - cpu0[1]) * per_request,
            "engine_cpu_us": (engine1[0] - engine0[0]) * per_request,
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
        min_streams = scenario.min_streams if self.options.honour_min_streams else 1
        command = self._loadgen("stream", url, "--concurrency", str(scenario.concurrency))
        command += ["--seconds", str(self.options.seconds), "--min-streams", str(min_streams)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
        cpu1 = _cpu(proxy.pid)
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        streams = int(result["streams"])
        record: Record = {k: v for k, v in result.items() if isinstance(v, int | float)}
        per_stream = 1e6 / streams if streams else math.nan
        record["cpu_us"] = (cpu1[0] - cpu0[0]) * per_stream
        record["cpu_us_stat"] = (cpu1[1] - cpu0[1]) * per_stream
        record["peak_rss_mib"] = _peak_rss_mib(proxy.pid)
        return record

    def _run_hold(self, scenario: Scenario, proxy: Running, url: str) -> Record:
        if proxy.pid is None:
            return {}
        self._warm_up(url, 32)
        idle = memory_kib(proxy.pid, "VmRSS")
        streams = scenario.concurrency
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
