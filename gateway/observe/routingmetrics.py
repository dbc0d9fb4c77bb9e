"""The numbers of engine-aware routing: placements, the queue, the replicas.

Kept apart from metrics.py's request tallies, and filled by the balancer (the
one place that knows them) through a ``RoutingTallies`` it owns: the
hot path adds to plain dicts, and the families are built when scraped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.metrics_core import Metric

from gateway.observe.families import add_counts, counter, gauge, histogram
from gateway.observe.histogram import Histogram

QUEUE_OUTCOMES = ("admitted", "timeout", "left")


class RoutedPool(Protocol):
    """A balancer, as the metrics read it when scraped."""

    tallies: RoutingTallies

    def gauges(self, tallies: RoutingTallies) -> None: ...


@dataclass
class RoutingTallies:
    """Counters, and gauges read when scraped (one worker's, or several added up)."""

    # (key source or "none", "home" | "spilled" | "least_in_flight") -> requests
    placements: dict[tuple[str, str], int] = field(default_factory=dict)
    replica_requests: dict[str, int] = field(default_factory=dict)
    waits: dict[str, Histogram] = field(default_factory=dict)  # by queue outcome
    shed: dict[str, int] = field(default_factory=dict)  # "full" | "timeout"
    # Gauges.
    queue_depth: dict[str, int] = field(default_factory=dict)  # by priority
    replica_in_flight: dict[str, int] = field(default_factory=dict)
    replicas: dict[str, int] = field(default_factory=dict)  # by state

    def wait(self, outcome: str, seconds: float) -> None:
        """One request left the queue after ``seconds``: admitted, timed out, or its client left."""
        hist = self.waits.get(outcome)
        if hist is None:
            hist = self.waits[outcome] = Histogram()
        hist.observe(seconds)

    def shed_one(self, reason: str) -> None:
        """One request answered 503 by the queue (full, or timeout)."""
        self.shed[reason] = self.shed.get(reason, 0) + 1

    def merge(self, other: RoutingTallies) -> None:
        """Add another worker's numbers to these."""
        add_counts(self.placements, other.placements)
        for name in ("replica_requests", "shed", "queue_depth", "replica_in_flight", "replicas"):
            add_counts(getattr(self, name), getattr(other, name))
        for outcome, hist in other.waits.items():
            self.waits.setdefault(outcome, Histogram()).merge(hist)

    def counters_only(self) -> RoutingTallies:
        """These counters with the gauges at zero (a dead worker's saved numbers)."""
        return RoutingTallies(
            placements=dict(self.placements),
            replica_requests=dict(self.replica_requests),
            waits=dict(self.waits),
            shed=dict(self.shed),
        )

    def encode(self) -> dict[str, Any]:
        """As JSON-able data (for the workers' snapshots)."""
        return {
            "placements": [[*k, n] for k, n in self.placements.items()],
            "replica_requests": self.replica_requests,
            "waits": {o: [h.counts, h.total] for o, h in self.waits.items()},
            "shed": self.shed,
            "queue_depth": self.queue_depth,
            "replica_in_flight": self.replica_in_flight,
            "replicas": self.replicas,
        }

    @classmethod
    def decode(cls, data: dict[str, Any]) -> RoutingTallies:
        """The inverse of ``encode``."""
        waits = {}
        for outcome, (counts, total) in data["waits"].items():
            hist = Histogram()
            if len(counts) != len(hist.counts):
                raise ValueError("histogram with other buckets")
            hist.counts, hist.total = [int(c) for c in counts], float(total)
            waits[outcome] = hist
        ints = {
            name: {str(k): int(v) for k, v in data[name].items()}
            for name in ("replica_requests", "shed", "queue_depth", "replica_in_flight", "replicas")
        }
        return cls(
            placements={(str(s), str(p)): int(n) for s, p, n in data["placements"]},
            waits=waits,
            **ints,
        )


def routing_families(t: RoutingTallies) -> Iterator[Metric]:
    """The Prometheus families of ``t``."""
    yield counter(
        "ft_gateway_routing_placements",
        "Requests placed on a replica, by affinity key source (none: no key) and placement: "
        "home (the key's own replica), spilled (the next one: home was over the load bound) "
        "or least_in_flight.",
        ["source", "placement"],
        t.placements,
    )
    yield counter(
        "ft_gateway_replica_requests",
        "Requests sent to each engine replica.",
        ["replica"],
        t.replica_requests,
    )
    yield gauge(
        "ft_gateway_replica_in_flight",
        "Requests in flight on each engine replica (the load the router counts).",
        ["replica"],
        t.replica_in_flight,
    )
    yield gauge(
        "ft_gateway_replicas",
        "Engine replicas by state: in_service, ejected (failed a connect), draining "
        "(gone from DNS, finishing its requests).",
        ["state"],
        t.replicas,
    )
    yield gauge(
        "ft_gateway_queue_depth",
        "Requests waiting in the gateway's queue for a replica below upstream.max_in_flight, "
        "by priority (interactive, batch).",
        ["priority"],
        t.queue_depth,
    )
    yield histogram(
        "ft_gateway_queue_wait_seconds",
        "Time requests spent in the queue, by outcome: admitted (sent to a replica), timeout "
        "(answered 503), left (the client hung up while waiting).",
        ["outcome"],
        t.waits,
    )
    yield counter(
        "ft_gateway_queue_shed",
        "Requests answered 503 by the queue: full (upstream.queue.size waiting already) or "
        "timeout (waited upstream.queue.timeout).",
        ["reason"],
        t.shed,
    )


def deployment_routing_families(by: dict[str, RoutingTallies]) -> Iterator[Metric]:
    """A fleet's replicas and queues by deployment (names from the config)."""
    yield gauge(
        "ft_gateway_deployment_replicas",
        "A fleet's engine replicas by deployment and state (in_service, ejected, draining).",
        ["deployment", "state"],
        {(d, state): n for d, t in by.items() for state, n in t.replicas.items()},
    )
    yield gauge(
        "ft_gateway_deployment_queue_depth",
        "Requests waiting in a fleet deployment's queue, by priority.",
        ["deployment", "priority"],
        {(d, p): n for d, t in by.items() for p, n in t.queue_depth.items()},
    )
    yield counter(
        "ft_gateway_deployment_queue_shed",
        "Requests a fleet deployment's queue answered 503 (full, timeout); its failover, "
        "if any, took them.",
        ["deployment", "reason"],
        {(d, r): n for d, t in by.items() for r, n in t.shed.items()},
    )
