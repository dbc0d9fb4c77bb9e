"""The registry of upstream clients: names in the config, classes by "module:Class"."""

from __future__ import annotations

import typing

import httpx
import pytest

from gateway.settings import Upstream
from gateway.upstream.balancer import Balancer
from gateway.upstream.factory import CLIENTS, client_class, make_upstream
from tests.support.gateways import gateway_settings


def test_the_config_names_exactly_the_registered_clients() -> None:
    # The Literal of upstream.client is what `check` and the schema accept; the
    # table is what the factory can build: one name missing from either is a bug.
    assert set(typing.get_args(Upstream.model_fields["client"].annotation)) == set(CLIENTS)


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_each_registered_class_is_an_upstream_client(name: str) -> None:
    cls = client_class(name)
    assert cls.__name__ == CLIENTS[name].partition(":")[2]
    assert callable(getattr(cls, "request", None)) and callable(getattr(cls, "aclose", None))


@pytest.mark.anyio
async def test_an_injected_transport_means_the_httpx_client() -> None:
    settings = gateway_settings(overrides={("upstream", "client"): "httptools"})
    upstream = make_upstream(settings, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    try:
        assert type(upstream) is client_class("httpx")
    finally:
        await upstream.aclose()


@pytest.mark.anyio
async def test_several_replicas_make_a_balancer_of_the_named_client() -> None:
    settings = gateway_settings(
        overrides={
            ("upstream", "url"): "http://127.0.0.1:9,http://127.0.0.1:10",
            ("upstream", "client"): "aiohttp",
        }
    )
    upstream = make_upstream(settings)
    try:
        assert isinstance(upstream, Balancer)
        assert {type(r.client) for r in upstream.replicas} == {client_class("aiohttp")}
    finally:
        await upstream.aclose()
