"""Least in flight against affinity with bounded load, over reference engines with a
prefix cache: one command, both policies side by side in one run.

``python -m bench.routing [--replicas 4] [--prefill-ms-per-token 0.5] [--quick]``

For each workload (bench/routing_load.py: multi-turn conversations with shared
system prompts; a skewed one with a few very hot conversations) and each
policy, in turn: ``--replicas`` fresh reference engines (``python -m
refengine`` with ``--prefix-cache-blocks`` and ``--prefill-ms-per-token``:
empty caches for each run), the gateway in front of them as ``python -m
gateway serve`` with ``upstream.routing`` set, then the workload through it.
The table gives, per workload and policy: the share of prompt tokens the
engines served from their cache (``usage.prompt_tokens_details.cached_tokens``
over ``prompt_tokens``), time to the first content token p50/p99, requests/s,
the uncached prompt tokens per request (the prefill work), the spread of
requests over replicas (max/mean of the gateway's
``ft_gateway_replica_requests``) and of their load (max/mean of each replica's
requests in flight, read from the gateway's metrics every 250 ms), and the
gateway's CPU µs per request (those scrapes included, alike for both). Then
the routing decision's own cost (the ``routing`` cost scenario, bench/cost/routing.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.cost.runner import report
from bench.ports import free_port
from bench.processes import processes, until_ok
from bench.procstat import cpu_seconds
from bench.routing_load import MULTI_TURN, SKEWED, Outcome, Shape, run_workload
from bench.stats import percentile
from bench.table import format_number, markdown

# A policy, or "affinity:F" for affinity with load_factor F.
POLICIES = ("least_in_flight", "affinity", "affinity:2")
SAMPLE_SECONDS = 0.25  # how often the replicas' in-flight gauges are read


@dataclass
class Result:
    """One workload through one policy."""

    workload: str
    policy: str
    cache_blocks: int
    outcome: Outcome
    served: dict[str, float]
    spilled: float  # share of keyed requests placed off their home replica
    in_flight: dict[str, float]  # mean over the samples
    gateway_cpu: float


@contextlib.asynccontextmanager
async def fleet(
    policy: str, *, replicas: int, prefill_ms: float, cache_blocks: int
) -> AsyncIterator[tuple[str, int]]:
    """Fresh engines and a gateway routing by ``policy``; yields (gateway URL, its pid)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    ports = [free_port(hold=True) for _ in range(replicas)]
    engines = [
        (
            [
                sys.executable, "-m", "refengine", "--port", str(port),
                "--prefix-cache-blocks", str(cache_blocks),
                "--prefill-ms-per-token", str(prefill_ms),
                "--log-level", "warning",
            ],
            env,
        )
        for port in ports
    ]  # fmt: skip
    urls = ",".join(f"http://127.0.0.1:{port}" for port in ports)
    port = free_port(hold=True)
    gateway_env = {
        **env,
        "FT_GATEWAY_UPSTREAM__ROUTING": policy.partition(":")[0],
        "FT_GATEWAY_LOG__REQUESTS": "false",
    }
    if ":" in policy:
        gateway_env["FT_GATEWAY_UPSTREAM__AFFINITY__LOAD_FACTOR"] = policy.partition(":")[2]
    gateway = [
        sys.executable, "-m", "gateway", "serve", "--upstream", urls, "--port", str(port),
        "--workers", "1", "--log-level", "warning",
    ]  # fmt: skip
    with processes(engines):
        for engine_port in ports:
            await until_ok(f"http://127.0.0.1:{engine_port}/health", "an engine")
        with processes([(gateway, gateway_env)]) as (pid,):
            url = f"http://127.0.0.1:{port}"
            await until_ok(f"{url}/readyz", "the gateway")
            yield url, pid


async def _scrape(client: httpx.AsyncClient, name: str, label: str = "replica") -> dict[str, float]:
    text = (await client.get("/metrics")).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == name:
            for sample in family.samples:
                if sample.name in (name, name + "_total"):
                    out[sample.labels[label]] = out.get(sample.labels[label], 0) + sample.value
    return out


async def run_one(
    workload: Shape, policy: str, args: argparse.Namespace, *, cache_blocks: int
) -> Result:
    """``workload`` through a fresh fleet (caches of ``cache_blocks``) routing by ``policy``."""
    async with (
        fleet(
            policy,
            replicas=args.replicas,
            prefill_ms=args.prefill_ms_per_token,
            cache_blocks=cache_blocks,
        ) as (url, pid),
        httpx.AsyncClient(base_url=url, timeout=10) as metrics,
    ):
        sums: dict[str, float] = {}
        count = 0
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal count
            while not done.is_set():
                for replica, value in (
                    await _scrape(metrics, "ft_gateway_replica_in_flight")
                ).items():
                    sums[replica] = sums.get(replica, 0.0) + value
                count += 1
                await asyncio.sleep(0.05)

        before = await _scrape(metrics, "ft_gateway_replica_requests")  # readiness checks
        sampler = asyncio.create_task(sample())
        cpu = cpu_seconds(pid)
        outcome = await run_workload(url, workload)
        cpu = cpu_seconds(pid) - cpu
        done.set()
        await sampler
        after = await _scrape(metrics, "ft_gateway_replica_requests")
        placements = await _scrape(metrics, "ft_gateway_routing_placements", "placement")
    served = {r: n - before.get(r, 0.0) for r, n in after.items()}
    in_flight = {r: s / max(count, 1) for r, s in sums.items()}
    per_request = cpu / max(len(outcome.samples), 1) * 1e6
    keyed = placements.get("home", 0.0) + placements.get("spilled", 0.0)
    spilled = placements.get("spilled", 0.0) / keyed if keyed else math.nan
    return Result(
        workload.name, policy, cache_blocks, outcome, served, spilled, in_flight, per_request
    )


def _spread(values: dict[str, float]) -> float:
    if not values or not sum(values.values()):
        return math.nan
    mean = sum(values.values()) / len(values)
    return max(values.values()) / mean


def result_table(results: list[Result]) -> str:
    """Workloads down, figures across, each policy its own row."""
    rows = [
        [
            "workload", "cache blocks", "policy", "requests", "failed", "cached share",
            "uncached tok/req", "TTFT p50 ms", "TTFT p99 ms", "req/s", "requests max/mean",
            "load max/mean", "spilled", "gateway CPU µs/req",
        ]
    ]  # fmt: skip
    for r in results:
        ok = [s for s in r.outcome.samples if s.ok]
        prompt = sum(s.prompt_tokens for s in ok)
        ttfts = [s.ttft * 1000 for s in ok if not math.isnan(s.ttft)]
        rows.append(
            [
                r.workload,
                str(r.cache_blocks),
                r.policy,
                str(len(r.outcome.samples)),
                str(len(r.outcome.samples) - len(ok)),
                f"{sum(s.cached_tokens for s in ok) / prompt:.0%}" if prompt else "-",
                format_number(
                    (prompt - sum(s.cached_tokens for s in ok)) / len(ok) if ok else math.nan
                ),
                format_number(percentile(ttfts, 50)),
                format_number(percentile(ttfts, 99)),
                format_number(len(ok) / r.outcome.seconds if r.outcome.seconds else math.nan),
                format_number(_spread(r.served)),
                format_number(_spread(r.in_flight)),
                "-" if math.isnan(r.spilled) else f"{r.spilled:.0%}",
                format_number(r.gateway_cpu),
            ]
        )
    return markdown(rows, left=3)


async def run_all(args: argparse.Namespace) -> list[Result]:
    shapes = [MULTI_TURN, SKEWED]
    if args.quick:
        args.cache_blocks = args.cache_blocks[:1]
        shapes = [
            replace(MULTI_TURN, conversations=12, turns=4, concurrency=8),
            replace(SKEWED, conversations=6, turns=2, hot_requests=12),
        ]
    results = []
    for blocks in args.cache_blocks:
        for shape in shapes:
            for policy in args.policies:
                print(
                    f"running {shape.name} with {policy}, {blocks} cache blocks...",
                    file=sys.stderr,
                    flush=True,
                )
                results.append(await run_one(shape, policy, args, cache_blocks=blocks))
    return results


def main(argv: list[str] | None = None) -> None:
    """Run both workloads through both policies; print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.5)
    parser.add_argument(
        "--cache-blocks",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[8192, 256],
        help="prefix cache blocks per engine, one run for each size (default: 8192,256: "
        "every conversation fits; only a replica's share of them fits)",
    )
    parser.add_argument(
        "--policies",
        type=lambda text: text.split(","),
        default=list(POLICIES),
        help="routing policies to compare; affinity:F sets load_factor F "
        "(default: least_in_flight,affinity,affinity:2)",
    )
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results = asyncio.run(run_all(args))
    print(
        f"{args.replicas} reference engines, prefill {args.prefill_ms_per_token:g} ms per "
        "uncached prompt token, prefix cache blocks of 16 tokens:"
    )
    print(result_table(results))
    print()
    print(report("routing", options={"replicas": args.replicas}))
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
