"""The cost scenarios by name: one row each, the scenario found by a ``module:attribute``
string, so the runner imports only what it runs (a scenario's module imports the parts
of the gateway it prices, and the libraries they use).

A new measurement is a row here and a ``Scenario`` in the module of what it starts:
bench/cost/pieces.py, bench/cost/policy.py and bench/cost/routing.py (parts of the
gateway called alone), bench/cost/requests.py (requests through the gateway in
process), bench/cost/batches.py (processes).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from bench.cost.scenario import Scenario


@dataclass(frozen=True)
class Entry:
    """A scenario's name, where it is defined, and what it measures, in a line."""

    name: str
    target: str
    summary: str


ENTRIES = [
    Entry("fanout", "bench.cost.requests:FANOUT", "n served by fan-out against one request"),
    Entry("responses", "bench.cost.requests:RESPONSES", "the Responses route against chat"),
    Entry("store", "bench.cost.requests:STORE", "the SQLite response store's write and read"),
    Entry("limits", "bench.cost.requests:LIMITS", "requests with rate limits off and on"),
    Entry("tracing", "bench.cost.requests:TRACING", "tracing off, on, and sampled 1 in 100"),
    Entry("memory", "bench.cost.requests:MEMORY", "what a request holds in memory"),
    Entry("merge", "bench.cost.pieces:MERGE", "a streamed chunk checked, and rewritten by n"),
    Entry("limiter", "bench.cost.pieces:LIMITER", "a rate-limit decision per store"),
    Entry("observers", "bench.cost.pieces:OBSERVERS", "the metrics and access-log observers"),
    Entry("policy", "bench.cost.policy:POLICY", "apply_policy with and without nested rules"),
    Entry("report", "bench.cost.policy:REPORT", "what report-only rules cost untouched bodies"),
    Entry("routing", "bench.cost.routing:ROUTING", "the routing decision's pieces"),
    Entry("model-lookup", "bench.cost.pieces:MODEL_LOOKUP", "routing by model on a fleet"),
    Entry("validators", "bench.cost.policy:VALIDATORS", "JSON-Schema validators and checks"),
    Entry("batch-share", "bench.cost.batches:BATCH_SHARE", "what a batch costs traffic beside"),
]
BY_NAME = {entry.name: entry for entry in ENTRIES}


def select(names: list[str]) -> list[str]:
    """Scenario names by name or prefix (``all``: every one), in the registry's order."""
    if "all" in names:
        return list(BY_NAME)
    unknown = [n for n in names if not any(e.startswith(n) for e in BY_NAME)]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; known: {list(BY_NAME)}")
    return [e for e in BY_NAME if any(e == n or e.startswith(n) for n in names)]


def load(name: str) -> Scenario:
    """The scenario registered as ``name`` (its module imported now)."""
    module, _, attribute = BY_NAME[name].target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, Scenario) or found.name != name:
        raise TypeError(f"{BY_NAME[name].target} is not the scenario {name!r}")
    return found
