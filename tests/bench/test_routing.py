"""bench/routing.py runs end to end on a tiny workload (its decision's cost, the routing
cost scenario: tests/bench/test_cost_scenarios.py)."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import pytest

from bench.routing import result_table, run_one
from bench.routing_load import MULTI_TURN


@pytest.mark.anyio
async def test_a_tiny_workload_runs_through_both_policies() -> None:
    shape = replace(MULTI_TURN, conversations=2, turns=2, concurrency=2, max_tokens=3)
    args = argparse.Namespace(replicas=2, prefill_ms_per_token=0.0)
    results = [
        await run_one(shape, policy, args, cache_blocks=64)
        for policy in ("least_in_flight", "affinity")
    ]
    for result in results:
        assert len(result.outcome.samples) == 4
        assert all(s.ok for s in result.outcome.samples)
        assert sum(result.served.values()) == 4
    # Affinity: both turns of a conversation on one replica, so the second hits the cache.
    affinity = results[1].outcome.samples
    assert sum(s.cached_tokens for s in affinity) > 0
    table = result_table(results)
    lines = [line.split("|")[3].strip() for line in table.splitlines()[2:]]
    assert lines == ["least_in_flight", "affinity"]
    assert math.isnan(results[0].spilled) and 0 <= results[1].spilled <= 1
