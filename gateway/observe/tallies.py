"""Every number the metrics show (``Tallies``), as plain dicts that can be merged, so that
several worker processes add theirs up for one scrape (observe/workermetrics.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.observe.batchmetrics import BatchTallies
from gateway.observe.families import add_counts
from gateway.observe.histogram import Histogram
from gateway.observe.routingmetrics import RoutingTallies

RELOAD_RESULTS = ("loaded", "unchanged", "failed")


@dataclass
class Tallies:
    """Every number the metrics show, keyed by label values."""

    requests: dict[tuple[str, str, int], int] = field(default_factory=dict)
    decisions: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Would-be refusals of report-only rules, by (route, field, the error code).
    reported: dict[tuple[str, str, str], int] = field(default_factory=dict)
    answer_violations: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    latency: dict[str, Histogram] = field(default_factory=dict)
    ttfb: dict[str, Histogram] = field(default_factory=dict)
    upstream_errors: dict[str, int] = field(default_factory=dict)
    disconnects: dict[str, int] = field(default_factory=dict)
    reloads: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RELOAD_RESULTS, 0))
    in_flight: int = 0
    streams_in_flight: int = 0
    policy: tuple[str, str, float] | None = None  # path, sha256, loaded at (Unix time)
    # By API key name (the operator names them, so the labels are bounded) and status.
    clients: dict[tuple[str, int], int] = field(default_factory=dict)
    trace_spans_dropped: int = 0
    routing: RoutingTallies = field(default_factory=RoutingTallies)
    # Tokens the engine reported, by (route, model, kind) and by (client, kind);
    # kind: prompt, completion, total.
    tokens: dict[tuple[str, str, str], int] = field(default_factory=dict)
    client_tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    usage_missing: dict[str, int] = field(default_factory=dict)  # answered, no usage: by route
    rate_limited: dict[tuple[str, str], int] = field(default_factory=dict)  # (client, limit)
    limit_store_errors: int = 0
    limit_store_bypassed: int = 0
    # A fleet's requests by (deployment, served model, status), and its deployments'
    # time to first byte: names from the config, so the labels are bounded by it.
    deployments: dict[tuple[str, str, int], int] = field(default_factory=dict)
    deployment_ttfb: dict[str, Histogram] = field(default_factory=dict)
    deployment_routing: dict[str, RoutingTallies] = field(default_factory=dict)
    batches: BatchTallies = field(default_factory=BatchTallies)

    def merge(self, other: Tallies) -> None:
        """Add ``other``'s numbers to these (another worker's, for one scrape)."""
        add_counts(self.requests, other.requests)
        add_counts(self.decisions, other.decisions)
        add_counts(self.reported, other.reported)
        add_counts(self.answer_violations, other.answer_violations)
        add_counts(self.upstream_errors, other.upstream_errors)
        add_counts(self.disconnects, other.disconnects)
        add_counts(self.reloads, other.reloads)
        add_counts(self.clients, other.clients)
        add_counts(self.tokens, other.tokens)
        add_counts(self.client_tokens, other.client_tokens)
        add_counts(self.usage_missing, other.usage_missing)
        add_counts(self.rate_limited, other.rate_limited)
        add_counts(self.deployments, other.deployments)
        for name, routing in other.deployment_routing.items():
            self.deployment_routing.setdefault(name, RoutingTallies()).merge(routing)
        self.limit_store_errors += other.limit_store_errors
        self.limit_store_bypassed += other.limit_store_bypassed
        for hists, others in (
            (self.latency, other.latency),
            (self.ttfb, other.ttfb),
            (self.deployment_ttfb, other.deployment_ttfb),
        ):
            for route, hist in others.items():
                hists.setdefault(route, Histogram()).merge(hist)
        self.in_flight += other.in_flight
        self.streams_in_flight += other.streams_in_flight
        self.trace_spans_dropped += other.trace_spans_dropped
        self.policy = self.policy or other.policy
        self.routing.merge(other.routing)
        self.batches.merge(other.batches)
