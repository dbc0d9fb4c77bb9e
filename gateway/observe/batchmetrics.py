"""The Batch API's numbers: batches by status, lines done and failed, the runner's
concurrency per deployment (filled from the runner when /metrics is scraped)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric

from gateway.observe.families import add_counts, counter, gauge


@dataclass
class BatchTallies:
    """The runner's numbers; gauges are this process's own (summed over workers) but for
    the batches by status, which every runner reads from the one store (their largest)."""

    unfinished: dict[str, int] = field(default_factory=dict)  # gauge: by status
    finished: dict[str, int] = field(default_factory=dict)  # counter: ended here, by status
    lines: dict[str, int] = field(default_factory=dict)  # counter: completed, failed, retried
    cap: dict[str, int] = field(default_factory=dict)  # gauge: by deployment
    in_flight: dict[str, int] = field(default_factory=dict)  # gauge: by deployment
    backoffs: dict[str, int] = field(default_factory=dict)  # counter: by deployment

    def merge(self, other: BatchTallies) -> None:
        """Add another worker's numbers."""
        for status, n in other.unfinished.items():
            self.unfinished[status] = max(n, self.unfinished.get(status, 0))
        for mine, theirs in (
            (self.finished, other.finished),
            (self.lines, other.lines),
            (self.cap, other.cap),
            (self.in_flight, other.in_flight),
            (self.backoffs, other.backoffs),
        ):
            add_counts(mine, theirs)

    def counters_only(self) -> BatchTallies:
        """The counters, gauges dropped (a dead worker's saved numbers)."""
        return BatchTallies(
            finished=dict(self.finished), lines=dict(self.lines), backoffs=dict(self.backoffs)
        )

    def encode(self) -> dict[str, Any]:
        """As JSON-able data (for the workers' snapshots)."""
        return {
            "unfinished": self.unfinished,
            "finished": self.finished,
            "lines": self.lines,
            "cap": self.cap,
            "in_flight": self.in_flight,
            "backoffs": self.backoffs,
        }

    @classmethod
    def decode(cls, data: dict[str, Any]) -> BatchTallies:
        """The inverse of ``encode``."""
        return cls(**{k: {str(a): int(b) for a, b in v.items()} for k, v in data.items()})


def batch_families(t: BatchTallies) -> Iterator[Metric]:
    """The batch metric families."""
    yield gauge(
        "ft_gateway_batches",
        "Batches a runner still has work in, by status (validating, in_progress, "
        "finalizing, cancelling), as the store holds them.",
        ["status"],
        t.unfinished,
    )
    yield counter(
        "ft_gateway_batches_finished",
        "Batches this gateway ended, by status (completed, failed, expired, cancelled).",
        ["status"],
        t.finished,
    )
    yield counter(
        "ft_gateway_batch_lines",
        "Batch lines with a recorded answer, by outcome (completed, failed), and lines sent "
        "again because no engine took them (retried).",
        ["outcome"],
        t.lines,
    )
    yield gauge(
        "ft_gateway_batch_concurrency",
        "The runner's cap on batch lines in flight, by deployment (halved while interactive "
        "requests wait in its queue).",
        ["deployment"],
        t.cap,
    )
    yield gauge(
        "ft_gateway_batch_lines_in_flight",
        "Batch lines in flight, by deployment.",
        ["deployment"],
        t.in_flight,
    )
    yield counter(
        "ft_gateway_batch_backoffs",
        "Times the runner halved a deployment's cap.",
        ["deployment"],
        t.backoffs,
    )
