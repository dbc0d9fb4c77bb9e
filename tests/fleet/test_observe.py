"""A fleet's record read by the observers: the metrics count by deployment and served
model (names from the config), the access log names the deployment."""

from __future__ import annotations

from gateway.observe.exchange import Exchange
from gateway.observe.logs import request_record
from gateway.observe.metrics import Metrics, families
from gateway.observe.routingmetrics import RoutingTallies
from gateway.observe.workermetrics import decode_tallies, encode_tallies
from tests.support.metrics import Scrape

CHAT = "/v1/chat/completions"


def served(deployment: str | None, model: str, served: str | None, status: int) -> Exchange:
    exchange = Exchange("POST", CHAT, CHAT, "r", model=model, status=status)
    exchange.deployment, exchange.served = deployment, served
    exchange.upstream_started, exchange.first_byte = 1.0, 1.25
    return exchange


def test_requests_and_first_bytes_are_counted_by_deployment_and_served_model() -> None:
    metrics = Metrics()
    for exchange in (
        served("chat", "alpha", "alpha", 200),
        served("chat", "gpt-4o-mini", "alpha", 200),  # an alias counts as its model
        served("code", "beta", "beta", 400),
        served(None, "any", None, 200),  # the single deployment: none of these series
    ):
        metrics.started(exchange)
        metrics.finished(exchange)
    m = Scrape(metrics.render().decode())
    requests = "ft_gateway_deployment_requests_total"
    assert m(requests, deployment="chat", model="alpha", status="200") == 2
    assert m(requests, deployment="code", model="beta", status="400") == 1
    assert len(m.labelled(requests)) == 2
    assert m("ft_gateway_deployment_ttfb_seconds_count", deployment="chat") == 2
    assert m("ft_gateway_deployment_ttfb_seconds_sum", deployment="code") == 0.25


def test_the_fleet_series_add_up_across_worker_processes() -> None:
    metrics = Metrics()
    exchange = served("chat", "alpha", "alpha", 200)
    metrics.started(exchange)
    metrics.finished(exchange)
    tallies = metrics.snapshot()
    tallies.deployment_routing = {"chat": RoutingTallies(shed={"full": 3}, replicas={"ejected": 1})}
    tallies.merge(decode_tallies(encode_tallies(tallies)))  # another worker's, as it saves them
    assert tallies.deployments == {("chat", "alpha", 200): 2}
    assert tallies.deployment_ttfb["chat"].total == 0.5
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families(tallies)
        for s in family.samples
    }
    assert (
        samples[
            "ft_gateway_deployment_queue_shed_total", (("deployment", "chat"), ("reason", "full"))
        ]
        == 6
    )
    assert (
        samples["ft_gateway_deployment_replicas", (("deployment", "chat"), ("state", "ejected"))]
        == 2
    )


def test_the_access_log_names_the_deployment_only_in_a_fleet() -> None:
    assert request_record(served("code", "beta", "beta", 200), 2.0)["deployment"] == "code"
    assert "deployment" not in request_record(served(None, "any", None, 200), 2.0)
