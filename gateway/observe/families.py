"""Prometheus families from plain tallies: the builders both metrics modules use.

A tally is a dict keyed by one label value or a tuple of them; histograms are
``observe.histogram.Histogram`` counts, made cumulative here, when scraped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from gateway.observe.histogram import BOUNDS, Histogram

K = TypeVar("K")
OTHER = "(other)"  # the label of every value past a cap, or not among the known ones
MAX_LABEL = 100


class Capped:
    """Label values as given (cut short) until ``limit`` distinct ones, then ``(other)``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def label(self, value: str) -> str:
        """``value``'s label."""
        if value not in self.seen:
            if len(self.seen) >= self.limit:
                return OTHER
            self.seen.add(value)
        return value[:MAX_LABEL]


def add_counts(mine: dict[K, int], theirs: Mapping[K, int]) -> None:
    """Add ``theirs`` into ``mine`` key by key (another worker's tally)."""
    for key, value in theirs.items():
        mine[key] = mine.get(key, 0) + value


def _values(key: Any) -> list[str]:
    return [str(v) for v in (key if isinstance(key, tuple) else (key,))]


def counter(
    name: str, doc: str, labels: list[str], tally: Mapping[Any, int]
) -> CounterMetricFamily:
    """A counter family from a tally."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, n in list(tally.items()):
        family.add_metric(_values(key), n)
    return family


def gauge(name: str, doc: str, labels: list[str], tally: Mapping[Any, float]) -> GaugeMetricFamily:
    """A gauge family from a tally."""
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, n in list(tally.items()):
        family.add_metric(_values(key), n)
    return family


def histogram(
    name: str, doc: str, labels: list[str], hists: Mapping[Any, Histogram]
) -> HistogramMetricFamily:
    """A histogram family from Histograms by label value(s)."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, hist in list(hists.items()):
        cumulative, buckets = 0, []
        for bound, count in zip(BOUNDS, hist.counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        family.add_metric(_values(key), buckets, hist.total)
    return family
