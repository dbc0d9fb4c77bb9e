"""Medians over rounds, differences from direct, and per-round ratios."""

from __future__ import annotations

import math

import pytest

from bench.results import Record, add_differences, ratio_pairs, summarize
from bench.scenarios import SCENARIOS, select

CHAT_C1 = [s for s in SCENARIOS if s.name == "chat-c1"]


def _record(round_: int, contender: str, rps: float, p50: float, errors: int = 0) -> Record:
    return {
        "round": round_,
        "scenario": "chat-c1",
        "contender": contender,
        "rps": rps,
        "p50_ms": p50,
        "errors": errors,
    }


def test_added_latency_is_paired_with_direct_in_the_same_round() -> None:
    records = [_record(0, "direct", 100, 1.0), _record(0, "nginx", 80, 1.5)]
    records += [_record(1, "direct", 100, 2.0), _record(1, "nginx", 80, 2.25)]
    add_differences(records)
    assert [r["added_p50_ms"] for r in records] == [0.0, 0.5, 0.0, 0.25]


def test_summary_takes_medians_and_per_round_ratios() -> None:
    records = [
        _record(0, "nginx", 100, 1),
        _record(0, "naive", 10, 1),
        _record(0, "gateway", 50, 1),
        _record(1, "nginx", 200, 1),
        _record(1, "naive", 20, 1),
        _record(1, "gateway", 60, 1),
        _record(2, "nginx", 300, 1),
        _record(2, "naive", 30, 1),
        _record(2, "gateway", 90, 1),
    ]
    rows = summarize(records, CHAT_C1, ["nginx", "naive", "gateway"])
    rps = next(r for r in rows if r.metric == "req/s")
    assert rps.scenario == "chat c=1"
    assert rps.values == {"nginx": 200, "naive": 20, "gateway": 60}
    # Per-round gateway/nginx ratios are 0.5, 0.3, 0.3: the median is not 60/200.
    assert rps.ratios[("gateway", "nginx")] == pytest.approx(0.3)
    assert rps.ratios[("gateway", "naive")] == pytest.approx(3.0)
    assert rps.ratios[("nginx", "naive")] == pytest.approx(10.0)
    assert ("nginx", "nginx") not in rps.ratios


def test_missing_figures_are_nan_and_error_rows_only_when_errors() -> None:
    rows = summarize([_record(0, "nginx", 100, 1)], CHAT_C1, ["direct", "nginx"])
    assert "errors" not in [r.metric for r in rows]
    rps = next(r for r in rows if r.metric == "req/s")
    assert math.isnan(rps.values["direct"])
    rows = summarize([_record(0, "nginx", 100, 1, errors=3)], CHAT_C1, ["nginx"])
    assert "errors" in [r.metric for r in rows]


def test_select_scenarios_by_prefix() -> None:
    assert [s.name for s in select(["chat"])] == ["chat-c1", "chat-c32", "chat-c256"]
    assert [s.name for s in select(["hold", "paced-c64"])] == ["paced-c64", "hold-1000"]
    with pytest.raises(ValueError, match="unknown scenario"):
        select(["nope"])


def test_ratios_to_nginx_for_all_and_to_each_router_for_the_gateway() -> None:
    names = ["direct", "nginx", "naive", "envoy", "vllm-router", "smg", "gateway"]
    pairs = ratio_pairs(names)
    assert [c for c, r in pairs if r == "nginx"] == [n for n in names if n != "nginx"]
    for reference in ("vllm-router", "smg", "naive"):
        assert [c for c, r in pairs if r == reference] == ["nginx", "gateway"]
    assert ("smg", "vllm-router") not in pairs and ("envoy", "naive") not in pairs
    assert ratio_pairs(["nginx", "gateway-baseline", "gateway"]) == [
        ("gateway-baseline", "nginx"),
        ("gateway", "nginx"),
    ]
