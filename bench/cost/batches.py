"""The ``batch-share`` scenario: what a batch costs the interactive traffic beside it
(``python -m bench.cost batch-share``).

Three cases side by side, each a whole run on a fresh reference engine with a bounded
batch (``max_batch``, a pause per step so slots are contended) behind one gateway
process with ``upstream.max_in_flight`` (its queue):

- ``alone``: the interactive clients only;
- ``batch API``: the same clients while a batch of ``lines`` chat requests runs
  through /v1/batches (low priority, the runner's pace);
- ``flood``: the same clients while a script sends those requests itself, ``flood``
  at a time, as interactive requests (what teams do without it).

The interactive clients (``clients``, closed loop) send chat requests for ``seconds``;
the table gives their p50 and p99 latency, and the batch's lines per second (to its
last line, measured from the start of the run). Each case's call is one such run, and
reports its own figures; ``--rounds`` repeats them, interleaved.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import openai

from bench.cost.scenario import Case, Context, Scenario, cases
from bench.ports import free_port
from bench.processes import processes, until_ok
from bench.stats import percentile

MODEL = "Qwen3.8-Flash-Next"
RUNS = ("alone", "batch API", "flood")


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


async def one_run(name: str, options: Mapping[str, Any], directory: Path) -> dict[str, float]:
    """One case's run on a fresh engine and gateway: its figures."""
    lines, tokens, max_batch = options["lines"], options["tokens"], options["max_batch"]
    engine_port, port = free_port(hold=True), free_port(hold=True)
    folder = directory / f"{name.replace(' ', '-')}-{time.monotonic_ns()}"
    config = folder.with_suffix(".yaml")
    config.write_text(
        json.dumps(
            {
                "upstream": {
                    "url": f"http://127.0.0.1:{engine_port}",
                    "max_in_flight": max_batch,
                    "queue": {"timeout": 120},
                },
                "log": {"requests": False},
                "store": {"backend": "none"},
                "batches": {
                    "directory": str(folder),
                    "concurrency": options["concurrency"],
                    "poll_seconds": 0.2,
                },
            }
        )
    )
    engine = [sys.executable, "-m", "refengine", "--port", str(engine_port)]
    engine += ["--max-batch", str(max_batch), "--step-delay-ms", str(options["step_ms"])]
    gateway = [sys.executable, "-m", "gateway", "serve", "--config", str(config)]
    gateway += ["--port", str(port), "--workers", "1", "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    with processes([(engine, {}), (gateway, {})]):
        await until_ok(f"http://127.0.0.1:{engine_port}/v1/models", "the engine")
        await until_ok(f"{url}/healthz", "the gateway")
        start = time.perf_counter()
        job: asyncio.Task[float] | None = None
        if name == "batch API":
            job = asyncio.create_task(batch_api(url, lines, tokens))
        elif name == "flood":
            job = asyncio.create_task(flood(url, lines, tokens, options["flood"]))
        latencies = await interactive(
            url, clients=options["clients"], seconds=options["seconds"], tokens=tokens
        )
        figures = {}
        if job is not None:
            await job
            figures["lines_per_s"] = lines / (time.perf_counter() - start)
    ms = sorted(x * 1000 for x in latencies)
    return figures | {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "requests": len(ms),
    }


def _runs(ctx: Context) -> list[Case]:
    def run(name: str) -> Any:
        async def call() -> dict[str, float]:
            return await one_run(name, ctx.options, ctx.directory)

        return call

    return [Case(name, run(name), base=None if name == "alone" else "alone") for name in RUNS]


BATCH_SHARE = Scenario(
    "batch-share",
    "interactive chat clients alone, beside a batch through /v1/batches, and beside the "
    "same requests sent as a flood; a reference engine with a bounded batch behind one "
    "gateway with a queue",
    cases(_runs),
    figures=("p50_ms", "p99_ms", "requests", "lines_per_s"),
    compare=("p99_ms",),
    rounds=1,
    number=1,
    warmup=0,
    options={
        "clients": 4,  # interactive clients, closed loop
        "seconds": 15.0,  # interactive time
        "lines": 600,  # the batch's lines
        "tokens": 16,  # max_tokens of every request
        "max_batch": 8,  # engine rows (and upstream.max_in_flight)
        "step_ms": 2.0,  # engine pause per step
        "concurrency": 8,  # batches.concurrency
        "flood": 32,  # the flood's requests at once
    },
    labels={
        "case": "scenario",
        "p50_ms": "p50 ms",
        "p99_ms": "p99 ms",
        "p99_ms ratio": "p99 / alone",
        "lines_per_s": "batch lines/s",
    },
)
