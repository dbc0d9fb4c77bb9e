"""deploy/monitoring: every metric the Grafana dashboard and the Prometheus alert rules
name is one the gateway exports, with the suffix its type gives it (``promtool check
rules`` itself runs in scripts/promtool-check)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from gateway.observe.metrics import Metrics
from tests.support.paths import ROOT

MONITORING = ROOT / "deploy" / "monitoring"
NAME = re.compile(r"\bft_gateway_[a-z_]+")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """Every sample name /metrics can carry."""
    names: set[str] = set()
    for family in Metrics().collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "ft-gateway-rules.yaml").read_text())
    found = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard: dict[str, Any] = json.loads((MONITORING / "ft-gateway-dashboard.json").read_text())
    found += [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    found += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return found


def test_every_metric_the_dashboard_and_the_rules_name_is_exported() -> None:
    named = {name for expr in expressions() for name in NAME.findall(expr)}
    assert len(named) >= 10, named
    assert named - exported() == set()


def test_the_dashboard_covers_each_deployment_signal() -> None:
    named = {name for expr in expressions() for name in NAME.findall(expr)}
    for wanted in (
        "ft_gateway_deployment_requests_total",  # request rate, errors by code
        "ft_gateway_deployment_ttfb_seconds_bucket",  # p50/p99 time to first byte
        "ft_gateway_policy_decisions_total",  # rejections by field
        "ft_gateway_deployment_queue_depth",
        "ft_gateway_deployment_queue_shed_total",
        "ft_gateway_deployment_replicas",
        "ft_gateway_tokens_total",
        "ft_gateway_rate_limited_total",
    ):
        assert wanted in named
