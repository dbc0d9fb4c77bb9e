"""bench/traffic.py: the traffic mix is the same for the same seed and holds what the
policy refuses."""

from __future__ import annotations

from bench import traffic
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file
from tests.support.paths import POLICY


def test_the_traffic_mix_is_reproducible_and_mixed() -> None:
    first = list(traffic.traffic(300, seed=3))
    assert first == list(traffic.traffic(300, seed=3))
    assert first != list(traffic.traffic(300, seed=4))
    policy = Policy(load_policy_file(POLICY)[0])
    routes = {route for route, _ in first}
    assert routes == {traffic.CHAT, traffic.COMPLETIONS, traffic.RESPONSES}
    refused = sum(apply_policy(policy, r, b).error is not None for r, b in first)
    assert 0 < refused < len(first) // 2
