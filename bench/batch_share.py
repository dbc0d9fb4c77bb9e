"""What a batch costs the interactive traffic beside it: ``python -m bench.batch_share``.

One run, three scenarios side by side, each on a fresh reference engine with a
bounded batch (``--max-batch``, a pause per step so slots are contended) behind
one gateway process with ``upstream.max_in_flight`` (its queue):

- ``alone``: the interactive clients only;
- ``batch API``: the same clients while a batch of ``--lines`` chat requests runs
  through /v1/batches (low priority, the runner's pace);
- ``flood``: the same clients while a script sends those requests itself,
  ``--flood`` at a time, as interactive requests (what teams do without it).

The interactive clients (``--clients``, closed loop) send chat requests for
``--seconds``; the table gives their p50 and p99 latency, and the batch's lines per
second (to its last line, measured from the start of the scenario).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

from bench.routing import _free_port, _processes, _until_ok
from bench.stats import percentile
from bench.table import markdown

MODEL = "Qwen3.8-Flash-Next"
SCENARIOS = ("alone", "batch API", "flood")


@dataclass
class Figures:
    """One scenario's figures."""

    name: str
    p50_ms: float
    p99_ms: float
    requests: int
    lines_per_s: float | None


def chat(i: int, tokens: int) -> dict[str, Any]:
    """The request of line or client turn ``i``."""
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"Tell me about the old town, part {i}."}],
        "max_tokens": tokens,
        "seed": i,
    }


async def interactive(url: str, *, clients: int, seconds: float, tokens: int) -> list[float]:
    """Latencies (s) of closed-loop clients over ``seconds``."""
    latencies: list[float] = []
    end = time.monotonic() + seconds

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            i = 0
            while time.monotonic() < end:
                start = time.perf_counter()
                answer = await http.post("/v1/chat/completions", json=chat(n * 100000 + i, tokens))
                answer.raise_for_status()
                latencies.append(time.perf_counter() - start)
                i += 1

    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies


async def batch_api(url: str, lines: int, tokens: int) -> float:
    """Seconds until a batch of ``lines`` through /v1/batches is complete."""
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0)
    content = "".join(
        json.dumps(
            {
                "custom_id": f"l{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": chat(i, tokens),
            }
        )
        + "\n"
        for i in range(lines)
    ).encode()
    start = time.perf_counter()
    uploaded = await client.files.create(file=("in.jsonl", io.BytesIO(content)), purpose="batch")
    batch = await client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        await asyncio.sleep(0.1)
        batch = await client.batches.retrieve(batch.id)
    if batch.status != "completed":
        raise SystemExit(f"the batch ended {batch.status}: {batch.errors}")
    await client.close()
    return time.perf_counter() - start


async def flood(url: str, lines: int, tokens: int, width: int) -> float:
    """Seconds until a script sending ``lines`` requests ``width`` at a time is done."""
    queue = list(range(lines))
    start = time.perf_counter()

    async def worker() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            while queue:
                (
                    await http.post("/v1/chat/completions", json=chat(queue.pop(), tokens))
                ).raise_for_status()

    await asyncio.gather(*(worker() for _ in range(width)))
    return time.perf_counter() - start


async def scenario(name: str, args: argparse.Namespace, directory: Path) -> Figures:
    """One scenario on a fresh engine and gateway."""
    engine_port, port = _free_port(), _free_port()
    config = directory / f"{name.replace(' ', '-')}.yaml"
    config.write_text(
        json.dumps(
            {
                "upstream": {
                    "url": f"http://127.0.0.1:{engine_port}",
                    "max_in_flight": args.max_batch,
                    "queue": {"timeout": 120},
                },
                "log": {"requests": False},
                "store": {"backend": "none"},
                "batches": {
                    "directory": str(directory / name.replace(" ", "-")),
                    "concurrency": args.concurrency,
                    "poll_seconds": 0.2,
                },
            }
        )
    )
    engine = [sys.executable, "-m", "refengine", "--port", str(engine_port)]
    engine += ["--max-batch", str(args.max_batch), "--step-delay-ms", str(args.step_ms)]
    gateway = [sys.executable, "-m", "gateway", "serve", "--config", str(config)]
    gateway += ["--port", str(port), "--workers", "1", "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    with _processes([(engine, {}), (gateway, {})]):
        await _until_ok(f"http://127.0.0.1:{engine_port}/v1/models", "the engine")
        await _until_ok(f"{url}/healthz", "the gateway")
        start = time.perf_counter()
        job: asyncio.Task[float] | None = None
        if name == "batch API":
            job = asyncio.create_task(batch_api(url, args.lines, args.tokens))
        elif name == "flood":
            job = asyncio.create_task(flood(url, args.lines, args.tokens, args.flood))
        latencies = await interactive(
            url, clients=args.clients, seconds=args.seconds, tokens=args.tokens
        )
        rate = None
        if job is not None:
            await job
            rate = args.lines / (time.perf_counter() - start)
    ms = sorted(x * 1000 for x in latencies)
    return Figures(name, percentile(ms, 50), percentile(ms, 99), len(ms), rate)


def table(results: list[Figures]) -> str:
    """The figures side by side, latencies also as a ratio to ``alone``."""
    alone = results[0]
    lines = [["scenario", "p50 ms", "p99 ms", "p99 / alone", "requests", "batch lines/s"]]
    for r in results:
        lines.append(
            [
                r.name,
                f"{r.p50_ms:.1f}",
                f"{r.p99_ms:.1f}",
                f"{r.p99_ms / alone.p99_ms:.2f}",
                str(r.requests),
                "-" if r.lines_per_s is None else f"{r.lines_per_s:.1f}",
            ]
        )
    return markdown(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the scenarios and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.batch_share", description=__doc__)
    parser.add_argument("--clients", type=int, default=4, help="interactive clients")
    parser.add_argument("--seconds", type=float, default=15.0, help="interactive time")
    parser.add_argument("--lines", type=int, default=600, help="the batch's lines")
    parser.add_argument("--tokens", type=int, default=16, help="max_tokens of every request")
    parser.add_argument("--max-batch", type=int, default=8, help="engine rows (max_in_flight)")
    parser.add_argument("--step-ms", type=float, default=2.0, help="engine pause per step")
    parser.add_argument("--concurrency", type=int, default=8, help="batches.concurrency")
    parser.add_argument("--flood", type=int, default=32, help="the flood's requests at once")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        results = [asyncio.run(scenario(name, args, Path(tmp))) for name in SCENARIOS]
    print(table(results))


if __name__ == "__main__":
    main()
