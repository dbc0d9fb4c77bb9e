"""The routing metrics: exposed from the balancer's tallies, added up over workers."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app.factory import create_app
from gateway.observe.metrics import Tallies
from gateway.observe.routingmetrics import RoutingTallies
from gateway.observe.workermetrics import _counters_only, decode_tallies, encode_tallies
from tests.support.bodies import CHAT, chat
from tests.support.gateways import MockEngine, asgi_client, gateway_settings


def filled() -> RoutingTallies:
    t = RoutingTallies()
    t.placements[("content", "home")] = 3
    t.replica_requests["http://a"] = 3
    t.wait("admitted", 0.2)
    t.shed_one("timeout")
    t.queue_depth = {"interactive": 2, "batch": 1}
    t.replica_in_flight = {"http://a": 4}
    t.replicas = {"in_service": 1, "ejected": 0, "draining": 0}
    return t


def test_routing_tallies_survive_the_workers_snapshot_and_add_up() -> None:
    tallies = Tallies(routing=filled())
    back = decode_tallies(encode_tallies(tallies)).routing
    assert back.encode() == tallies.routing.encode()
    total = RoutingTallies()
    total.merge(back)
    total.merge(filled())
    assert total.placements == {("content", "home"): 6}
    assert total.queue_depth == {"interactive": 4, "batch": 2}
    assert sum(total.waits["admitted"].counts) == 2
    dead = _counters_only(Tallies(routing=filled())).routing
    assert dead.queue_depth == {} and dead.replica_in_flight == {} and dead.shed == {"timeout": 1}
    # A snapshot from a worker without routing numbers still reads.
    old = encode_tallies(Tallies()).replace(b',"routing":', b',"_":')
    assert decode_tallies(old).routing == RoutingTallies()


def test_a_histogram_with_other_buckets_is_refused() -> None:
    data = filled().encode()
    data["waits"]["admitted"][0] = [1, 2]
    with pytest.raises(ValueError):
        RoutingTallies.decode(data)


@pytest.mark.anyio
async def test_metrics_show_placements_replicas_and_the_queue() -> None:
    settings = gateway_settings(
        "http://127.0.0.1:9,http://127.0.0.1:10",
        environ={"FT_GATEWAY_UPSTREAM__ROUTING": "affinity"},
    )
    app = create_app(settings, transport=MockEngine().transport)
    async with asgi_client(app) as client:
        for _ in range(3):
            assert (await client.post(CHAT, json=chat())).status_code == 200
        text = (await client.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    placements = {
        (s.labels["source"], s.labels["placement"]): s.value
        for s in families["ft_gateway_routing_placements"].samples
        if s.name.endswith("_total")
    }
    assert placements == {("content", "home"): 3}
    served = [s.value for s in families["ft_gateway_replica_requests"].samples]
    assert sorted(served) == [3.0]
    states = {s.labels["state"]: s.value for s in families["ft_gateway_replicas"].samples}
    assert states == {"in_service": 2.0, "ejected": 0.0, "draining": 0.0}
    depth = {s.labels["priority"]: s.value for s in families["ft_gateway_queue_depth"].samples}
    assert depth == {"interactive": 0.0, "batch": 0.0}
    assert "ft_gateway_queue_wait_seconds" in families
    assert "ft_gateway_queue_shed" in families
    assert "ft_gateway_replica_in_flight" in families
