"""What ``n`` served by fan-out adds over a single request, through the gateway.

``python -m bench.fanout_cost [--rounds N] [--number N] [--n N] [--client NAME]``

The gateway runs in this process, called as an ASGI app with hand-written
``receive``/``send`` (no client HTTP stack to measure), in front of the fast
fake engine (bench/fake_engine.py) in its own process over loopback: latency
and CPU time are then the gateway's own, its upstream client's included. A
single request and the same request with ``n`` run one after another, one
request at a time, interleaved round by round so a noisy machine slows both
alike; JSON, streamed (64 chunks per stream, sent at once, so the gateway
merges whole blocks of events), and paced streams (the same 64 chunks 1 ms
apart, each arriving on its own as from a real engine). The table gives
medians of the rounds: p50 latency and CPU microseconds per client request,
and the ratios fan-out / single. The fake engine answers at once, so the
figures are the gateway's work alone: with a real engine the n requests run
concurrently and the added latency is this plus whatever the engine's batch
takes longer.

Then the per-event cost of the stream merge: what a streamed chunk costs the
single relay (``EventSplitter.feed``, which parses it to check it) and what
fan-out adds (``StreamMerge.rewrite``: a second parse, the index and id
rewritten, a dump).
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.fake_engine import stream_events
from bench.table import format_number, markdown
from gateway.app.factory import create_app
from gateway.proxy.events import EventSplitter
from gateway.proxy.merge import StreamMerge
from gateway.settings import Settings, load_settings

ROUTE = "/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "Tell me about cats."}],
    "max_tokens": 64,
}


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


class _Call:
    """One client request as the ASGI server would hand it to the app."""

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": ROUTE,
            "raw_path": ROUTE.encode(),
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


# The engine's 64 chunks one millisecond apart: each arrives on its own, as from a
# real engine, where the whole stream at once (no pause) shows the most merging.
PACED = [(b"x-fake-chunk-delay-ms", b"1")]


@dataclass(frozen=True)
class Variant:
    """One kind of request measured: its body, its headers, its share of ``--number``."""

    name: str
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    share: int = 1  # runs number // share requests per round (paced streams are slow)


def variants(n: int) -> list[tuple[Variant, Variant]]:
    """Pairs of (single request, the same with ``n``)."""
    stream = {**BODY, "stream": True}
    return [
        (
            Variant("json single", orjson.dumps(BODY)),
            Variant(f"json n={n}", orjson.dumps({**BODY, "n": n})),
        ),
        (
            Variant("stream single", orjson.dumps(stream)),
            Variant(f"stream n={n}", orjson.dumps({**stream, "n": n})),
        ),
        (
            Variant("paced stream single", orjson.dumps(stream), PACED, share=10),
            Variant(f"paced stream n={n}", orjson.dumps({**stream, "n": n}), PACED, share=10),
        ),
    ]


async def _measure(
    settings: Settings, measured: list[Variant], *, rounds: int, number: int
) -> dict[str, tuple[float, float]]:
    """Per variant: (median p50 latency in us, median CPU us per request)."""
    app = create_app(settings)
    latency: dict[str, list[float]] = {v.name: [] for v in measured}
    cpu: dict[str, list[float]] = {v.name: [] for v in measured}
    async with app.router.lifespan_context(app):
        for variant in measured:  # warm up: connections, caches
            for _ in range(max(1, 20 // variant.share)):
                await _one(app, variant)
        for _ in range(rounds):
            for variant in measured:
                count = max(1, number // variant.share)
                times = []
                cpu_start = time.process_time()
                for _ in range(count):
                    times.append(await _one(app, variant))
                cpu[variant.name].append((time.process_time() - cpu_start) / count * 1e6)
                latency[variant.name].append(statistics.median(times) * 1e6)
    return {
        name: (statistics.median(latency[name]), statistics.median(cpu[name])) for name in latency
    }


async def _one(app: Any, variant: Variant) -> float:
    call = _Call(variant.body, variant.headers)
    start = time.perf_counter()
    await app(call.scope, call.receive, call.send)
    elapsed = time.perf_counter() - start
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status}")
    return elapsed


def rewrite_cost(*, number: int, rounds: int) -> tuple[float, float]:
    """Median us per streamed chunk: (checked by the splitter, rewritten by the merge)."""
    event = stream_events()[1]
    check: list[float] = []
    rewrite: list[float] = []
    for _ in range(rounds):
        splitter = EventSplitter()
        start = time.perf_counter()
        for _ in range(number):
            splitter.feed(event)
        check.append((time.perf_counter() - start) / number * 1e6)
        merge = StreamMerge(3, include_usage=False)
        start = time.perf_counter()
        for i in range(number):
            merge.rewrite(i % 3, event)
        rewrite.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(check), statistics.median(rewrite)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200, help="requests per variant per round")
    parser.add_argument("--n", type=int, default=3, help="the fan-out measured")
    parser.add_argument("--client", default=None, help="upstream.client (default: the default)")
    args = parser.parse_args(argv)
    pairs = variants(args.n)
    measured = [v for pair in pairs for v in pair]
    with fake_engine() as url:
        overrides: dict[tuple[str, ...], Any] = {
            ("upstream", "url"): url,
            ("log", "requests"): False,
        }
        if args.client is not None:
            overrides[("upstream", "client")] = args.client
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
        settings = load_settings(None, overrides=overrides, environ=environ)
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
            figures = asyncio.run(
                _measure(settings, measured, rounds=args.rounds, number=args.number)
            )
        else:
            figures = uvloop.run(
                _measure(settings, measured, rounds=args.rounds, number=args.number)
            )
    rows = []
    for single, fanned in pairs:
        for variant in (single, fanned):
            p50, cpu = figures[variant.name]
            rows.append([variant.name, format_number(p50), format_number(cpu), "", ""])
        rows[-1][3] = format_number(figures[fanned.name][0] / figures[single.name][0])
        rows[-1][4] = format_number(figures[fanned.name][1] / figures[single.name][1])
    print(
        f"through the gateway ({settings.upstream.client}) to the fast fake engine, one request "
        f"at a time: medians of {args.rounds} rounds of {args.number} requests each "
        f"({max(1, args.number // 10)} for paced streams: 64 chunks 1 ms apart)"
    )
    header = ["request", "p50 latency us", "CPU us/request", "latency ratio", "CPU ratio"]
    print(markdown([header, *rows]))
    check, rewrite = rewrite_cost(number=20000, rounds=args.rounds)
    print()
    print("per streamed chunk (a 64-chunk stream's typical event)")
    print(
        markdown(
            [
                ["step", "us/event"],
                ["checked (single relay and fan-out)", format_number(check)],
                ["rewritten (fan-out only)", format_number(rewrite)],
            ]
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
