"""A /metrics answer (Prometheus text) read back by sample name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]


class Scrape:
    """One /metrics answer: ``scrape(name, **labels)`` is the sample with exactly those
    labels, or None."""

    def __init__(self, text: str) -> None:
        self.samples: dict[tuple[str, Labels], float] = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def __call__(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def labelled(self, name: str) -> dict[Labels, float]:
        """Every sample of ``name``, by its labels."""
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels``."""
        wanted = labels.items()
        return sum(v for found, v in self.labelled(name).items() if wanted <= dict(found).items())
