"""The gateway in this process, as an ASGI app called with hand-written ``receive``/``send``
(no client HTTP stack to measure), in front of the fast fake engine
(bench/fake_engine.py) in its own process over loopback: latency and CPU time are the
gateway's own, its upstream client's included.

Shared by the benchmarks that compare pairs of request kinds side by side
(bench/fanout_cost.py, bench/responses_cost.py) and by bench/limiter_cost.py: one
request at a time, the kinds interleaved round by round so a noisy machine slows all
alike, medians of the rounds.

The gateway itself is imported only where an app is built, so that bench/callcount.py
can use the harness with another checkout's ``gateway`` first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from bench.table import format_number, markdown

if TYPE_CHECKING:
    from gateway.settings import Settings

CHAT = "/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "Tell me about cats."}],
    "max_tokens": 64,
}
# The engine's 64 chunks one millisecond apart: each arrives on its own, as from a
# real engine, where the whole stream at once (no pause) shows the most merging.
PACED = [(b"x-fake-chunk-delay-ms", b"1")]
HEADER = ["request", "p50 latency us", "CPU us/request", "latency ratio", "CPU ratio"]

# The fake engine in its own process, on a free port that it prints once it listens.
_ENGINE = """
import asyncio
from bench.fake_engine import start_engine

async def serve():
    server = await start_engine("127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

try:
    import uvloop
except ImportError:
    asyncio.run(serve())
else:
    uvloop.run(serve())
"""

T = TypeVar("T")


@contextlib.contextmanager
def fake_engine() -> Iterator[str]:
    """bench/fake_engine.py in its own process (so its CPU time is not counted here);
    yields its URL once it listens."""
    with subprocess.Popen([sys.executable, "-c", _ENGINE], stdout=subprocess.PIPE) as process:
        try:
            assert process.stdout is not None
            port = process.stdout.readline().strip()
            if not port:
                raise SystemExit("the fake engine did not start")
            yield f"http://127.0.0.1:{int(port)}"
        finally:
            process.terminate()


class Call:
    """One client request as the ASGI server would hand it to the app."""

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]], path: str = CHAT) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"gateway"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        self._body = body
        self._sent_body = False
        self._done = asyncio.Event()
        self.status = 0
        self.size = 0

    async def receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._done.wait()  # the client stays until the answer is complete
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.size += len(message.get("body", b""))
            if not message.get("more_body", False):
                self._done.set()


@dataclass(frozen=True)
class Variant:
    """One kind of request measured: its body, headers, route, share of ``--number``."""

    name: str
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    share: int = 1  # runs number // share requests per round (paced streams are slow)
    path: str = CHAT


async def one(app: Any, variant: Variant) -> float:
    """Seconds for one request of ``variant`` (anything but a 200 ends the bench)."""
    call = Call(variant.body, variant.headers, variant.path)
    start = time.perf_counter()
    await app(call.scope, call.receive, call.send)
    elapsed = time.perf_counter() - start
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status} to {variant.name}")
    return elapsed


async def measure(
    settings: Settings, measured: list[Variant], *, rounds: int, number: int
) -> dict[str, tuple[float, float]]:
    """Per variant: (median p50 latency in us, median CPU us per request)."""
    from gateway.app.factory import create_app

    app = create_app(settings)
    latency: dict[str, list[float]] = {v.name: [] for v in measured}
    cpu: dict[str, list[float]] = {v.name: [] for v in measured}
    async with app.router.lifespan_context(app):
        for variant in measured:  # warm up: connections, caches
            for _ in range(max(1, 20 // variant.share)):
                await one(app, variant)
        for _ in range(rounds):
            for variant in measured:
                count = max(1, number // variant.share)
                times = []
                cpu_start = time.process_time()
                for _ in range(count):
                    times.append(await one(app, variant))
                cpu[variant.name].append((time.process_time() - cpu_start) / count * 1e6)
                latency[variant.name].append(statistics.median(times) * 1e6)
    return {
        name: (statistics.median(latency[name]), statistics.median(cpu[name])) for name in latency
    }


def settings_for(
    url: str, *, client: str | None = None, store: dict[str, Any] | None = None
) -> Settings:
    """The default settings against the engine at ``url``, no access log, no response
    store unless ``store`` gives its keys (what is measured is the route, not a file),
    and none of this environment's FT_GATEWAY_* variables."""
    from gateway.settings import load_settings

    overrides: dict[tuple[str, ...], Any] = {("upstream", "url"): url, ("log", "requests"): False}
    for key, value in (store or {"backend": "none"}).items():
        overrides[("store", key)] = value
    if client is not None:
        overrides[("upstream", "client")] = client
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    return load_settings(None, overrides=overrides, environ=environ)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``main`` on uvloop, as ``ft-gateway serve`` runs (asyncio's loop where it is absent)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
        return asyncio.run(main)
    return uvloop.run(main)


def pair_rows(
    pairs: Sequence[tuple[Variant, Variant]], figures: dict[str, tuple[float, float]]
) -> list[list[str]]:
    """Table rows (HEADER's columns) for pairs of (base, other): the other's row carries
    the ratios other / base."""
    rows = []
    for base, other in pairs:
        for variant in (base, other):
            p50, cpu = figures[variant.name]
            rows.append([variant.name, format_number(p50), format_number(cpu), "", ""])
        rows[-1][3] = format_number(figures[other.name][0] / figures[base.name][0])
        rows[-1][4] = format_number(figures[other.name][1] / figures[base.name][1])
    return rows


def pair_options(parser: argparse.ArgumentParser) -> None:
    """The options of a pairs bench: rounds, requests per round, the upstream client."""
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200, help="requests per variant per round")
    parser.add_argument("--client", default=None, help="upstream.client (default: the default)")


def compare_pairs(pairs: Sequence[tuple[Variant, Variant]], args: argparse.Namespace) -> None:
    """Measure ``pairs`` (options of ``pair_options``) against the fake engine and print
    what was measured and the table."""
    measured = [v for pair in pairs for v in pair]
    with fake_engine() as url:
        settings = settings_for(url, client=args.client)
        figures = run(measure(settings, measured, rounds=args.rounds, number=args.number))
    print(describe(settings, rounds=args.rounds, number=args.number))
    print(markdown([HEADER, *pair_rows(pairs, figures)]))


def describe(settings: Settings, *, rounds: int, number: int) -> str:
    """The line above a pairs table: what was measured, and how."""
    return (
        f"through the gateway ({settings.upstream.client}) to the fast fake engine, one request "
        f"at a time: medians of {rounds} rounds of {number} requests each "
        f"({max(1, number // 10)} for paced streams: 64 chunks 1 ms apart)"
    )
