"""bench/report_cost.py and bench/traffic.py: report-only rules add no Python call to a
request they do not refuse (a count, so a guard that holds under any load); the traffic
mix is the same for the same seed and holds what the policy refuses."""

from __future__ import annotations

import pytest

from bench import report_cost, traffic
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file
from tests.support.paths import POLICY, ROOT


def test_report_only_rules_add_no_call_where_they_refuse_nothing() -> None:
    texts = report_cost.variants(POLICY.read_text())
    shipped = report_cost.count_calls(ROOT, texts["shipped"], profile=None)
    trial = report_cost.count_calls(ROOT, texts["report-only profile"], profile="trial")
    whole = report_cost.count_calls(ROOT, texts["whole policy report-only"], profile=None)
    assert set(shipped) == set(report_cost.bodies())
    assert all(n > 0 for n in shipped.values())
    assert shipped == trial == whole


def test_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_cost.main(["--rounds", "1", "--number", "10"]) == 0
    out = capsys.readouterr().out
    assert "| chat, 2 messages | " in out and "microseconds per apply_policy" in out


def test_the_traffic_mix_is_reproducible_and_mixed() -> None:
    first = list(traffic.traffic(300, seed=3))
    assert first == list(traffic.traffic(300, seed=3))
    assert first != list(traffic.traffic(300, seed=4))
    policy = Policy(load_policy_file(POLICY)[0])
    routes = {route for route, _ in first}
    assert routes == {traffic.CHAT, traffic.COMPLETIONS, traffic.RESPONSES}
    refused = sum(apply_policy(policy, r, b).error is not None for r, b in first)
    assert 0 < refused < len(first) // 2
