"""Soak: many concurrent streams through a real ``ft-gateway serve`` to a fast fake
engine, both on loopback, bounded in time and count; then check for leaks.

    python -m tests.support.soak --concurrency 500 --duration 60     (scripts/soak)

The gateway and the engine (tests/support/engine.py) run as processes of their own,
so the figures are the gateway's alone, read from /proc: open file
descriptors, RSS, and its TCP connections to the engine's port. Order:
baseline (after one request) -> warm-up load -> settle -> RSS baseline ->
soak load -> settle -> figures. "Settle" is what a load balancer's readiness
probe does anyway: a GET /readyz every half second (one engine request each,
at which the upstream pool closes connections idle past their keep-alive)
until the descriptors and connections are back to the baseline, or 45 s pass
(aiohttp closes idle connections within twice its 15 s keep-alive).
Passes when no request failed, descriptors and connections are back to the
baseline, and RSS is within 10% of the post-warm-up figure.

With ``--redis-limits`` every request also goes through a rate limit kept in a
real ``redis-server`` of the soak's own (set high enough never to refuse, and
failing closed, so a limiter failure is a failed request); the gateway's
connections to that Redis must be back to the baseline too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tests.support.paths import POLICY, ROOT
from tests.support.redisserver import RedisServer
from tests.support.servers import free_port, serve_environ

BODY = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
).encode()
SETTLE_DEADLINE = 45.0
MAX_REQUESTS = 10_000_000


@dataclass
class Snapshot:
    """The gateway process as /proc shows it."""

    fds: int
    rss_kib: int
    upstream_connections: int
    redis_connections: int = 0

    def __str__(self) -> str:
        return (
            f"fds {self.fds}, RSS {self.rss_kib / 1024:.1f} MiB, "
            f"upstream connections {self.upstream_connections}, "
            f"Redis connections {self.redis_connections}"
        )

    def within(self, target: Snapshot) -> bool:
        """Descriptors and connections no more than ``target``'s."""
        return (
            self.fds <= target.fds
            and self.upstream_connections <= target.upstream_connections
            and self.redis_connections <= target.redis_connections
        )


def snapshot(pid: int, engine_port: int, redis_port: int = 0) -> Snapshot:
    """Descriptors, RSS and TCP connections to ``engine_port`` (and ``redis_port``) of
    process ``pid``."""
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    fds = 0
    for entry in fd_dir.iterdir():
        fds += 1
        with contextlib.suppress(OSError):
            target = os.readlink(entry)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    connections = redis = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            parts = line.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            if parts[9] in inodes:
                connections += remote_port == engine_port
                redis += bool(redis_port) and remote_port == redis_port
    return Snapshot(fds, rss, connections, redis)


@dataclass
class Load:
    """What the load generator saw."""

    requests: int = 0
    failures: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def fail(self, reason: str) -> None:
        self.failures += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1


async def generate(url: str, *, concurrency: int, duration: float) -> Load:
    """``concurrency`` workers streaming chat completions back to back for ``duration`` s."""
    load = Load()
    deadline = time.monotonic() + duration
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def worker() -> None:
            while time.monotonic() < deadline and load.requests < MAX_REQUESTS:
                load.requests += 1
                try:
                    async with session.post(
                        "/v1/chat/completions",
                        data=BODY,
                        headers={"content-type": "application/json"},
                    ) as response:
                        data = await response.read()
                    if response.status != 200:
                        load.fail(f"HTTP {response.status}")
                    elif not data.endswith(b"data: [DONE]\n\n") or b'"error"' in data:
                        load.fail("stream ended with an error or without [DONE]")
                except (aiohttp.ClientError, TimeoutError) as exc:
                    load.fail(type(exc).__name__)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return load


@contextlib.asynccontextmanager
async def processes(
    limit_concurrency: int,
    client: str | None = None,
    rate_limits: dict[str, object] | None = None,
) -> AsyncIterator[tuple[str, int, int]]:
    """The engine and the gateway as processes; yields (gateway URL, gateway pid, engine port)."""
    env = serve_environ()
    engine = subprocess.Popen(
        [sys.executable, "-m", "tests.support.engine"], stdout=subprocess.PIPE, cwd=ROOT, env=env
    )
    gateway: subprocess.Popen[bytes] | None = None
    try:
        assert engine.stdout is not None
        line = await asyncio.to_thread(engine.stdout.readline)
        engine_port = int(line)
        port = free_port()
        config = {
            "listen": {"host": "127.0.0.1", "port": port},
            "upstream": {"url": f"http://127.0.0.1:{engine_port}"}
            | ({"client": client} if client else {}),
            "server": {"limit_concurrency": limit_concurrency, "drain_timeout": 1},
            "policy": str(POLICY),
        }
        if rate_limits is not None:
            config["rate_limits"] = rate_limits
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.yaml"
            path.write_text(json.dumps(config))
            gateway = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", "--config", str(path)]
                # One process: the fd, RSS and connection figures are read from its pid.
                + ["--log-level", "warning", "--workers", "1"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,  # the access log: a line per request
            )
            url = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession(url) as session:
                while True:
                    if gateway.poll() is not None:
                        raise RuntimeError("ft-gateway serve exited")
                    try:
                        async with session.get("/healthz") as response:
                            if response.status == 200:
                                break
                    except aiohttp.ClientError:
                        await asyncio.sleep(0.05)
            yield url, gateway.pid, engine_port
    finally:
        for process in (gateway, engine):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    await asyncio.to_thread(process.wait, 10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if engine.stdout is not None:
            engine.stdout.close()


async def settle(
    url: str, pid: int, engine_port: int, target: Snapshot | None, redis_port: int = 0
) -> Snapshot:
    """Probe /readyz every half second until fds and connections are back at ``target``."""
    deadline = time.monotonic() + SETTLE_DEADLINE
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(force_close=True)) as s:
        while True:
            async with s.get("/readyz") as response:
                await response.read()
            now = snapshot(pid, engine_port, redis_port)
            if target is None or time.monotonic() > deadline or now.within(target):
                return now
            await asyncio.sleep(0.5)


@dataclass
class SoakResult:
    """The soak's figures and verdict."""

    concurrency: int
    duration: float
    load: Load
    baseline: Snapshot
    warmed: Snapshot
    after: Snapshot
    seconds: float
    limiter: str | None = None  # with Redis limits: what the limiter's metrics say

    @property
    def rss_change(self) -> float:
        return (self.after.rss_kib - self.warmed.rss_kib) / self.warmed.rss_kib

    @property
    def ok(self) -> bool:
        return (
            self.load.failures == 0
            and self.load.requests > 0
            and self.after.within(self.baseline)
            and abs(self.rss_change) <= 0.10
        )

    def report(self) -> str:
        rate = self.load.requests / self.seconds if self.seconds else 0.0
        lines = [
            f"soak: {self.concurrency} concurrent streams for {self.duration:g} s",
            f"  requests {self.load.requests} ({rate:.0f}/s), failures {self.load.failures}"
            + (f" {self.load.reasons}" if self.load.reasons else ""),
            f"  baseline (after one request): {self.baseline}",
            f"  after warm-up, settled:       {self.warmed}",
            f"  after soak, settled:          {self.after}",
            f"  fds {self.baseline.fds} -> {self.after.fds}, upstream connections "
            f"{self.baseline.upstream_connections} -> {self.after.upstream_connections}, "
            f"Redis connections {self.baseline.redis_connections} -> "
            f"{self.after.redis_connections}, "
            f"RSS {self.warmed.rss_kib / 1024:.1f} -> {self.after.rss_kib / 1024:.1f} MiB "
            f"({self.rss_change:+.1%})",
        ]
        if self.limiter is not None:
            lines.append(f"  rate limits in Redis: {self.limiter}")
        lines.append(f"  verdict: {'PASS' if self.ok else 'FAIL'}")
        return "\n".join(lines)


async def soak(
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    client: str | None = None,
    redis_limits: bool = False,
) -> SoakResult:
    """Run the whole soak; see the module docstring. ``client``: ``upstream.client``;
    ``redis_limits``: every request through a rate limit kept in a Redis of its own."""
    if not redis_limits:
        return await _soak(concurrency, duration, warmup, client, None)
    with RedisServer() as redis:
        return await _soak(concurrency, duration, warmup, client, redis)


def _high_limits(redis: RedisServer) -> dict[str, object]:
    high = 10**9
    return {
        "default": {
            "requests_per_minute": high,
            "tokens_per_minute": high,
            "tokens_per_day": high,
            "concurrent_requests": high,
        },
        "store": "redis",
        # Failing closed: a limiter failure is a failed request the soak counts.
        "redis": {"url": redis.url, "timeout": 0.5, "on_failure": "fail_closed"},
    }


async def _limiter_figures(url: str) -> str:
    async with aiohttp.ClientSession(url) as session, session.get("/metrics") as response:
        text = await response.text()
    wanted = ("ft_gateway_rate_limit_store_errors_total", "ft_gateway_rate_limited_total")
    found = {name: 0.0 for name in wanted}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in found:
            found[name] += float(line.rsplit(" ", 1)[1])
    return f"store errors {found[wanted[0]]:.0f}, requests refused {found[wanted[1]]:.0f}"


async def _soak(
    concurrency: int,
    duration: float,
    warmup: float,
    client: str | None,
    redis: RedisServer | None,
) -> SoakResult:
    limit = max(2048, concurrency * 4)
    limits = _high_limits(redis) if redis is not None else None
    rport = redis.port if redis is not None else 0
    async with processes(limit_concurrency=limit, client=client, rate_limits=limits) as (
        url,
        pid,
        port,
    ):
        async with aiohttp.ClientSession(url) as session:
            async with session.post(
                "/v1/chat/completions", data=BODY, headers={"content-type": "application/json"}
            ) as response:
                assert response.status == 200, await response.text()
                await response.read()
        baseline = await settle(url, pid, port, None, rport)
        await generate(url, concurrency=concurrency, duration=warmup)
        warmed = await settle(url, pid, port, baseline, rport)
        started = time.monotonic()
        load = await generate(url, concurrency=concurrency, duration=duration)
        seconds = time.monotonic() - started
        after = await settle(url, pid, port, baseline, rport)
        figures = await _limiter_figures(url) if redis is not None else None
    return SoakResult(concurrency, duration, load, baseline, warmed, after, seconds, figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--client", help="upstream.client (default: the gateway's default)")
    parser.add_argument(
        "--redis-limits",
        action="store_true",
        help="every request through a (never refusing) rate limit kept in a Redis of its own",
    )
    args = parser.parse_args(argv)
    result = asyncio.run(
        soak(
            concurrency=args.concurrency,
            duration=args.duration,
            warmup=args.warmup,
            client=args.client,
            redis_limits=args.redis_limits,
        )
    )
    print(result.report())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
