"""Metrics across worker processes: a scrape of any worker adds up all of them.

Each worker keeps its own Tallies (metrics.py) and, in a directory the parent
made, answers on a Unix socket ``<pid>.sock`` with a JSON snapshot of them. A
scrape asks every live worker for a snapshot and merges them, so counters and
histograms are the sums over workers and in-flight gauges count every request
being handled, as fresh as the scrape.

Every few seconds each worker also writes its snapshot to ``<pid>.json``.
When a worker dies, the parent renames that file ``dead-<pid>.json`` and
scrapes keep adding its counters (gauges excluded): a crash loses at most
those few seconds of counts instead of making the summed counters fall back,
which Prometheus would read as a reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gateway.background import in_background
from gateway.observe.batchmetrics import BatchTallies
from gateway.observe.metrics import Histogram, Metrics, Tallies, families
from gateway.observe.routingmetrics import RoutingTallies

logger = logging.getLogger("gateway.workers")
PERSIST_SECONDS = 5.0
SNAPSHOT_TIMEOUT = 2.0
_MAX_SNAPSHOT = 64 * 1024 * 1024


def encode_tallies(t: Tallies) -> bytes:
    """Tallies as JSON (keys that are tuples become lists)."""
    return orjson.dumps(
        {
            "requests": [[*k, n] for k, n in t.requests.items()],
            "decisions": [[*k, n] for k, n in t.decisions.items()],
            "reported": [[*k, n] for k, n in t.reported.items()],
            "latency": {r: [h.counts, h.total] for r, h in t.latency.items()},
            "ttfb": {r: [h.counts, h.total] for r, h in t.ttfb.items()},
            "upstream_errors": t.upstream_errors,
            "disconnects": t.disconnects,
            "reloads": t.reloads,
            "in_flight": t.in_flight,
            "streams_in_flight": t.streams_in_flight,
            "policy": t.policy,
            "clients": [[*k, n] for k, n in t.clients.items()],
            "trace_spans_dropped": t.trace_spans_dropped,
            "routing": t.routing.encode(),
            "tokens": [[*k, n] for k, n in t.tokens.items()],
            "client_tokens": [[*k, n] for k, n in t.client_tokens.items()],
            "usage_missing": t.usage_missing,
            "rate_limited": [[*k, n] for k, n in t.rate_limited.items()],
            "limit_store": [t.limit_store_errors, t.limit_store_bypassed],
            "deployments": [[*k, n] for k, n in t.deployments.items()],
            "deployment_ttfb": {d: [h.counts, h.total] for d, h in t.deployment_ttfb.items()},
            "deployment_routing": {d: r.encode() for d, r in t.deployment_routing.items()},
            "batches": t.batches.encode(),
        }
    )


def _histogram(data: list[Any]) -> Histogram:
    hist = Histogram()
    counts, total = data
    if len(counts) != len(hist.counts):
        raise ValueError("histogram with other buckets")
    hist.counts = [int(c) for c in counts]
    hist.total = float(total)
    return hist


def decode_tallies(raw: bytes) -> Tallies:
    """The inverse of encode_tallies; ValueError (or KeyError, TypeError) if malformed."""
    d = orjson.loads(raw)
    policy = d["policy"]
    return Tallies(
        requests={(r, m, int(s)): int(n) for r, m, s, n in d["requests"]},
        decisions={(r, f, a): int(n) for r, f, a, n in d["decisions"]},
        reported={(r, f, v): int(n) for r, f, v, n in d.get("reported", [])},
        latency={r: _histogram(h) for r, h in d["latency"].items()},
        ttfb={r: _histogram(h) for r, h in d["ttfb"].items()},
        upstream_errors={k: int(n) for k, n in d["upstream_errors"].items()},
        disconnects={k: int(n) for k, n in d["disconnects"].items()},
        reloads={k: int(n) for k, n in d["reloads"].items()},
        in_flight=int(d["in_flight"]),
        streams_in_flight=int(d["streams_in_flight"]),
        policy=(str(policy[0]), str(policy[1]), float(policy[2])) if policy else None,
        clients={(c, int(s)): int(n) for c, s, n in d["clients"]},
        trace_spans_dropped=int(d.get("trace_spans_dropped", 0)),
        routing=RoutingTallies.decode(d["routing"]) if "routing" in d else RoutingTallies(),
        tokens={(r, m, k): int(n) for r, m, k, n in d.get("tokens", [])},
        client_tokens={(c, k): int(n) for c, k, n in d.get("client_tokens", [])},
        usage_missing={k: int(n) for k, n in d.get("usage_missing", {}).items()},
        rate_limited={(c, lim): int(n) for c, lim, n in d.get("rate_limited", [])},
        limit_store_errors=int(d.get("limit_store", [0, 0])[0]),
        limit_store_bypassed=int(d.get("limit_store", [0, 0])[1]),
        deployments={(p, m, int(s)): int(n) for p, m, s, n in d.get("deployments", [])},
        deployment_ttfb={p: _histogram(h) for p, h in d.get("deployment_ttfb", {}).items()},
        deployment_routing={
            p: RoutingTallies.decode(r) for p, r in d.get("deployment_routing", {}).items()
        },
        batches=BatchTallies.decode(d.get("batches", {})),
    )


def _read_file(path: Path) -> Tallies | None:
    try:
        return decode_tallies(path.read_bytes())
    except OSError:
        return None  # gone between listing and reading
    except (ValueError, KeyError, TypeError):
        logger.warning("ignoring a malformed metrics file", extra={"path": str(path)})
        return None


def _counters_only(t: Tallies) -> Tallies:
    t.in_flight = 0
    t.streams_in_flight = 0
    t.policy = None
    t.routing = t.routing.counters_only()
    t.deployment_routing = {d: r.counters_only() for d, r in t.deployment_routing.items()}
    t.batches = t.batches.counters_only()
    return t


def mark_worker_dead(directory: Path, pid: int) -> None:
    """Keep a dead worker's last counts in the sums, without its gauges (parent side)."""
    with contextlib.suppress(OSError):
        (directory / f"{pid}.sock").unlink()
    with contextlib.suppress(OSError):
        (directory / f"{pid}.json").rename(directory / f"dead-{pid}.json")


def _dead_tallies(directory: Path, live: set[int]) -> Iterator[Tallies]:
    for path in directory.glob("*.json"):
        pid = path.stem.removeprefix("dead-")
        if path.stem.startswith("dead-") or (pid.isdigit() and int(pid) not in live):
            t = _read_file(path)
            if t is not None:
                yield _counters_only(t)


async def _ask(path: Path) -> Tallies | None:
    try:
        async with asyncio.timeout(SNAPSHOT_TIMEOUT):
            reader, writer = await asyncio.open_unix_connection(str(path))
            try:
                raw = await reader.read(_MAX_SNAPSHOT)
            finally:
                writer.close()
        return decode_tallies(raw)
    except (OSError, TimeoutError, ValueError, KeyError, TypeError):
        return None


class WorkerMetrics:
    """One worker's side: answers snapshots, persists them, merges everyone's for a scrape."""

    def __init__(self, metrics: Metrics, directory: Path, *, pid: int | None = None) -> None:
        self.metrics = metrics
        self.directory = directory
        self.pid = os.getpid() if pid is None else pid

    def _own(self) -> bytes:
        return encode_tallies(self.metrics.snapshot())

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(self._own())
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    def _persist(self) -> None:
        path = self.directory / f"{self.pid}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(self._own())
        os.replace(temporary, path)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Answer other workers' scrapes and keep the snapshot file fresh, until exit."""
        path = self.directory / f"{self.pid}.sock"
        server = await asyncio.start_unix_server(self._answer, path=str(path))

        async def persist() -> None:
            while True:
                await asyncio.sleep(PERSIST_SECONDS)
                try:
                    self._persist()
                except OSError as exc:
                    logger.warning("cannot write the metrics file: %s", exc)

        try:
            async with in_background(persist()):
                yield
        finally:
            server.close()
            with contextlib.suppress(OSError):
                self._persist()  # the counts of this worker's last seconds
            with contextlib.suppress(OSError):
                path.unlink()

    async def merged(self) -> Tallies:
        """This worker's tallies plus every other worker's, live or dead."""
        total = Tallies()
        total.merge(self.metrics.snapshot())
        others = [p for p in self.directory.glob("*.sock") if p.stem != str(self.pid)]
        answers = await asyncio.gather(*(_ask(p) for p in others))
        live = {self.pid}
        for path, answer in zip(others, answers, strict=True):
            if answer is not None:
                live.add(int(path.stem))
                total.merge(answer)
        for t in _dead_tallies(self.directory, live):
            total.merge(t)
        return total

    async def render(self) -> bytes:
        """The Prometheus exposition of the merged tallies."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Fixed(await self.merged()))
        return generate_latest(registry)


class _Fixed(Collector):
    def __init__(self, tallies: Tallies) -> None:
        self.tallies = tallies

    def collect(self) -> Iterator[Metric]:
        return families(self.tallies)
