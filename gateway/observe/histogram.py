"""Latency histograms as plain numbers: counts per bucket, added up when scraped."""

from __future__ import annotations

import bisect

# Seconds. LLM answers range from milliseconds (a rejected or cached request)
# to minutes (a long generation).
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
BOUNDS = (*(repr(float(b)) for b in LATENCY_BUCKETS), "+Inf")


class Histogram:
    """Counts per bucket (not cumulative) and the sum, for one label set."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
        self.total += value

    def merge(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.total += other.total
