"""The routing keys of the config: defaults, validation, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import load_settings
from gateway.upstream.balancer import Balancer
from gateway.upstream.factory import make_upstream
from tests.support.configs import refused_config


def test_defaults_keep_least_in_flight_and_no_limit() -> None:
    upstream = load_settings(None, environ={}).upstream
    assert upstream.routing == "least_in_flight"
    assert upstream.max_in_flight is None and upstream.dns is None
    assert upstream.affinity.keys == ["prompt_cache_key", "header", "content"]
    assert upstream.affinity.load_factor == 1.25
    assert (upstream.queue.size, upstream.queue.timeout) == (1024, 30.0)


def test_dns_from_the_file_and_a_flag_replaces_it(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text(
        "upstream:\n  dns: {name: engine.ns.svc, port: 9000, nameserver: '127.0.0.1:5353'}\n"
        "  routing: affinity\n"
    )
    dns = load_settings(config, environ={}).upstream.dns
    assert dns is not None and (dns.name, dns.port, dns.interval) == ("engine.ns.svc", 9000, 5.0)
    flagged = load_settings(
        config, overrides={("upstream", "url"): "http://127.0.0.1:1"}, environ={}
    )
    assert flagged.upstream.dns is None and flagged.upstream.url == "http://127.0.0.1:1"
    assert flagged.upstream.routing == "affinity"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("upstream: {urls: ['http://a:1'], dns: {name: x}}", "not both"),
        ("upstream: {routing: nearest}", "upstream.routing"),
        ("upstream: {affinity: {load_factor: 0.5}}", "upstream.affinity.load_factor"),
        ("upstream: {affinity: {keys: [cookie]}}", "upstream.affinity.keys.0"),
        ("upstream: {affinity: {header: 'x session'}}", "upstream.affinity.header"),
        ("upstream: {max_in_flight: 0}", "upstream.max_in_flight"),
        ("upstream: {queue: {timeout: 0}}", "upstream.queue.timeout"),
        ("upstream: {dns: {name: x, nameserver: 'a b'}}", "upstream.dns.nameserver"),
        ("upstream: {dns: {port: 1}}", "upstream.dns.name"),
    ],
)
def test_bad_routing_config_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    assert message in str(refused_config(tmp_path, text + "\n"))


def test_a_limit_or_dns_means_a_balancer_even_for_one_engine() -> None:
    limited = load_settings(None, environ={"FT_GATEWAY_UPSTREAM__MAX_IN_FLIGHT": "4"})
    balancer = make_upstream(limited)
    assert isinstance(balancer, Balancer) and balancer.max_in_flight == 4
    assert len(balancer.replicas) == 1
    found = load_settings(None, environ={"FT_GATEWAY_UPSTREAM__DNS__NAME": "engine"})
    discovering = make_upstream(found)
    assert isinstance(discovering, Balancer) and discovering.replicas == []
    assert discovering.make_client is not None
