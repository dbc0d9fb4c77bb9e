"""What a rate-limit decision costs: in this process, shared by workers, over Redis.

``python -m bench.limiter_cost [--rounds N] [--number N]``

First the limiter alone: ``Limiter.admit`` (the decision, before the engine
is called) and ``Limiter.settle`` (after the answer) for a key with every
limit set (requests and tokens per minute, tokens per day, concurrency), high
enough never to refuse, through each store: ``local`` (one process's dict),
``shared`` (the shared-memory table of ``serve --workers N``, flock and all)
and ``redis`` (a real ``redis-server`` started here on a loopback port; one
``EVALSHA`` per decision, counted from Redis's own command statistics).
Wall and CPU microseconds per call, medians of interleaved rounds.

Then whole requests through the gateway (called as an ASGI app in this
process, as bench/fanout_cost.py does) in front of the fast fake engine:
CPU microseconds per request with limits off, and on with each store, for a
JSON answer and a 64-chunk stream; and streams with metering off (the
engine not asked for usage), to show what metering a stream costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis

from bench.inprocess import BODY, Call, fake_engine
from bench.table import format_number, markdown
from gateway.app.factory import create_app
from gateway.limits.config import RateLimits
from gateway.limits.limiter import Limiter, make_limiter
from gateway.limits.meter import Usage
from gateway.limits.redisstore import ACQUIRE
from gateway.settings import Settings, load_settings

HIGH = {
    "requests_per_minute": 10**9,
    "tokens_per_minute": 10**12,
    "tokens_per_day": 10**13,
    "concurrent_requests": 10**6,
}
STORES = ("local", "shared", "redis")


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A ``redis-server`` of our own on a free loopback port; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (scripts/services installs it)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with (
        tempfile.TemporaryDirectory() as directory,
        subprocess.Popen([*args, "--dir", directory], stdout=subprocess.DEVNULL) as process,
    ):
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.01)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()


def evalsha_calls(url: str) -> int:
    """How many EVALSHA commands Redis has run (its INFO commandstats)."""
    client = redis.Redis.from_url(url)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def limits_config(store: str, url: str) -> dict[str, Any]:
    """The ``rate_limits`` section for ``store`` (``shared`` is ``local`` with workers)."""
    config: dict[str, Any] = {"default": HIGH}
    if store == "redis":
        config |= {"store": "redis", "redis": {"url": url, "timeout": 0.5}}
    return config


async def _redis_py(url: str, *, rounds: int, number: int) -> tuple[float, float]:
    """The same admit script through redis-py's asyncio client (the contender the
    store does not use): median wall and CPU us per call."""
    client = aioredis.Redis.from_url(url)
    script = client.register_script(ACQUIRE)
    keys = ["bench:{redis-py}", "bench:{redis-py}:leases"]
    wall_us: list[float] = []
    cpu_us: list[float] = []
    try:
        for round_ in range(rounds + 1):
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(number):
                args: list[int | str] = [*HIGH.values(), 100, f"lease-{i}", 30_000_000]
                await script(keys=keys, args=args)
            if round_:  # the first is a warm-up
                wall_us.append((time.perf_counter() - wall) / number * 1e6)
                cpu_us.append((time.process_time() - cpu) / number * 1e6)
    finally:
        await client.aclose()
    return statistics.median(wall_us), statistics.median(cpu_us)


async def _decisions(
    limiters: dict[str, Limiter], *, rounds: int, number: int
) -> dict[str, dict[str, float]]:
    """Per store: median wall and CPU us of admit and of settle."""
    figures: dict[str, dict[str, list[float]]] = {
        s: {"admit": [], "admit_cpu": [], "settle": [], "settle_cpu": []} for s in limiters
    }
    usage = Usage(10, 50, 60)
    for _ in range(rounds):
        for store, limiter in limiters.items():
            tickets = []
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(number):
                tickets.append(await limiter.admit(f"key-{i % 8}", None, tokens=100))
            figures[store]["admit"].append((time.perf_counter() - wall) / number * 1e6)
            figures[store]["admit_cpu"].append((time.process_time() - cpu) / number * 1e6)
            wall, cpu = time.perf_counter(), time.process_time()
            for ticket in tickets:
                assert ticket is not None
                await limiter.settle(ticket, usage, status=200)
            figures[store]["settle"].append((time.perf_counter() - wall) / number * 1e6)
            figures[store]["settle_cpu"].append((time.process_time() - cpu) / number * 1e6)
    return {s: {k: statistics.median(v) for k, v in f.items()} for s, f in figures.items()}


def _app_settings(engine: str, limits: dict[str, Any] | None, *, metering: bool = True) -> Settings:
    overrides: dict[tuple[str, ...], Any] = {
        ("upstream", "url"): engine,
        ("log", "requests"): False,
        ("metering", "stream_usage"): metering,
    }
    if limits is not None:
        overrides[("rate_limits",)] = limits
    return load_settings(None, overrides=overrides, environ={})


async def _requests(
    apps: dict[str, Any], bodies: dict[str, bytes], *, rounds: int, number: int
) -> dict[tuple[str, str], float]:
    """Per (app, body): median CPU us per request over interleaved rounds."""
    cpu: dict[tuple[str, str], list[float]] = {(a, b): [] for a in apps for b in bodies}
    async with contextlib.AsyncExitStack() as stack:
        for app in apps.values():
            await stack.enter_async_context(app.router.lifespan_context(app))
        for _ in range(2):  # warm up
            for app in apps.values():
                for body in bodies.values():
                    await _one(app, body)
        for _ in range(rounds):
            for body_name, body in bodies.items():
                for name, app in apps.items():
                    start = time.process_time()
                    for _ in range(number):
                        await _one(app, body)
                    cpu[(name, body_name)].append((time.process_time() - start) / number * 1e6)
    return {k: statistics.median(v) for k, v in cpu.items()}


async def _one(app: Any, body: bytes) -> None:
    call = Call(body, [])
    await app(call.scope, call.receive, call.send)
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status}")


async def run(args: argparse.Namespace, url: str, engine: str, directory: Path) -> None:
    limiters: dict[str, Limiter] = {}
    for store in STORES:
        config = RateLimits.model_validate(limits_config(store, url))
        worker_dir = directory if store == "shared" else None
        limiter = make_limiter(config, worker_dir=worker_dir, worker_index=0)
        assert limiter is not None
        limiters[store] = limiter
    calls = evalsha_calls(url)
    decisions = await _decisions(limiters, rounds=args.rounds, number=args.number)
    per_decision = (evalsha_calls(url) - calls) / (args.rounds * args.number)
    for limiter in limiters.values():
        await limiter.aclose()
    redis_py = await _redis_py(url, rounds=args.rounds, number=args.number)
    print(
        f"the limiter alone, one key of 8 with all four limits (never refusing): medians of "
        f"{args.rounds} rounds of {args.number} decisions"
    )
    rows = [["store", "admit us", "admit CPU us", "settle us", "settle CPU us", "round trips"]]
    for store, f in decisions.items():
        trips = f"{per_decision / 2:.2f} + {per_decision / 2:.2f}" if store == "redis" else "0"
        rows.append(
            [
                store,
                format_number(f["admit"]),
                format_number(f["admit_cpu"]),
                format_number(f["settle"]),
                format_number(f["settle_cpu"]),
                trips,
            ]
        )
    rows.append(
        [
            "redis via redis-py (not used)",
            format_number(redis_py[0]),
            format_number(redis_py[1]),
            "-",
            "-",
            "1",
        ]
    )
    print(markdown(rows))

    apps = {"limits off": create_app(_app_settings(engine, None))}
    for store in STORES:
        worker_dir = directory / "app" if store == "shared" else None
        if worker_dir is not None:
            worker_dir.mkdir(exist_ok=True)
        apps[f"limits on, {store}"] = create_app(
            _app_settings(engine, limits_config(store, url)), worker_dir=worker_dir
        )
    apps["limits off, streams unmetered"] = create_app(_app_settings(engine, None, metering=False))
    bodies = {"json": orjson.dumps(BODY), "stream": orjson.dumps({**BODY, "stream": True})}
    figures = await _requests(apps, bodies, rounds=args.rounds, number=max(1, args.number // 10))
    print()
    print(
        "whole requests through the gateway (ASGI, in process) to the fast fake engine: "
        "CPU us per request, medians of interleaved rounds"
    )
    table = [["gateway", "json CPU us", "vs off", "stream CPU us", "vs off"]]
    for name in apps:
        base = [figures[("limits off", b)] for b in bodies]
        row = [name]
        for i, body_name in enumerate(bodies):
            value = figures[(name, body_name)]
            row += [format_number(value), f"{value - base[i]:+.1f}"]
        table.append(row)
    print(markdown(table))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.limiter_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000, help="decisions per store per round")
    args = parser.parse_args(argv)
    with (
        redis_server() as url,
        fake_engine() as engine,
        tempfile.TemporaryDirectory(prefix="ftgw-bench-") as directory,
    ):
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
            asyncio.run(run(args, url, engine, Path(directory)))
        else:
            uvloop.run(run(args, url, engine, Path(directory)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
