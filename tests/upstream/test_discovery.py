"""Replicas from DNS, against a real dnsmasq on loopback whose records the test changes:
a replica added or removed takes effect within the interval, without a restart and
without a failed request in a stream of requests running through the change."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from gateway.app.factory import create_app
from gateway.routing.config import Dns
from gateway.upstream.balancer import Balancer
from gateway.upstream.discovery import Discovery, replica_url, system_resolve
from gateway.upstream.dnsquery import nameserver_resolver
from tests.support.bodies import CHAT, chat
from tests.support.dnsmasq import Dnsmasq
from tests.support.gateways import gateway_settings
from tests.support.heldengine import HeldEngine
from tests.support.polling import until
from tests.support.servers import free_port, running_server

NAME = "engine.ft-test"
ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.fixture
def dnsmasq() -> Any:
    with Dnsmasq() as server:
        yield server


@contextlib.asynccontextmanager
async def engines_on(port: int) -> AsyncIterator[dict[str, HeldEngine]]:
    """One engine per address of ADDRESSES, all on ``port``."""
    changed = asyncio.Condition()
    engines = {address: HeldEngine(changed) for address in ADDRESSES}
    async with contextlib.AsyncExitStack() as stack:
        for address, engine in engines.items():
            engine.hold = False
            await stack.enter_async_context(running_server(engine.app, host=address, port=port))
        try:
            yield engines
        finally:
            for engine in engines.values():
                engine.let_go()


@contextlib.asynccontextmanager
async def gateway_on(
    dnsmasq: Dnsmasq, name: str
) -> AsyncIterator[tuple[int, dict[str, HeldEngine], Starlette, httpx.AsyncClient]]:
    """The gateway finding its replicas under ``name`` at ``dnsmasq`` (every 0.2 s), and
    one engine per address of ADDRESSES on one free port: (the port, the engines, the
    app, a client of it)."""
    port = free_port()
    env = {
        "FT_GATEWAY_UPSTREAM__DNS__NAME": name,
        "FT_GATEWAY_UPSTREAM__DNS__PORT": str(port),
        "FT_GATEWAY_UPSTREAM__DNS__INTERVAL": "0.2",
        "FT_GATEWAY_UPSTREAM__DNS__NAMESERVER": dnsmasq.nameserver,
    }
    async with engines_on(port) as engines:
        app = create_app(gateway_settings(environ=env))
        async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
            yield port, engines, app, client


class Stream:
    """Requests through the gateway, four at a time, until stopped; every status kept."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.statuses: list[int] = []
        self.errors: list[str] = []
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._run()) for _ in range(4)]

    async def _run(self) -> None:
        for _ in range(5000):  # bounded, whatever happens
            if self._stop.is_set():
                return
            try:
                response = await self.client.post(CHAT, json=chat())
                self.statuses.append(response.status_code)
                if response.status_code != 200:
                    self.errors.append(response.text)
            except httpx.HTTPError as exc:
                self.errors.append(repr(exc))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


@pytest.mark.anyio
async def test_replicas_follow_dns_without_restart_or_failed_request(dnsmasq: Dnsmasq) -> None:
    dnsmasq.set(NAME, ADDRESSES[:2])
    async with gateway_on(dnsmasq, NAME) as (port, engines, app, client):
        balancer = app.state.gateway.engines.upstream_for(None)
        assert isinstance(balancer, Balancer)
        # Resolved before serving: both replicas from the first request on.
        assert [r.url for r in balancer.replicas] == [f"http://{a}:{port}" for a in ADDRESSES[:2]]
        stream = Stream(client)
        await until(lambda: len(stream.statuses) >= 20, "requests to flow")
        third = engines[ADDRESSES[2]]
        assert third.arrived == 0

        dnsmasq.set(NAME, ADDRESSES)  # a replica joins
        await until(lambda: third.arrived >= 5, "the new replica to take requests")

        # A replica leaves while it has a request in flight: it drains.
        leaving = engines[ADDRESSES[0]]
        leaving.hold = True
        arrived = leaving.arrived
        await until(lambda: leaving.arrived > arrived, "a request held on the leaving one")
        dnsmasq.set(NAME, ADDRESSES[1:])
        gone = f"http://{ADDRESSES[0]}:{port}"
        await until(
            lambda: any(r.url == gone and r.draining for r in balancer.replicas),
            "the leaving replica to drain",
        )
        held = leaving.arrived
        before = len(stream.statuses)
        await until(lambda: len(stream.statuses) >= before + 40, "more requests")
        assert leaving.arrived == held  # no new request for a draining replica
        leaving.let_go()  # its requests in flight finish (and nothing more is held)...
        await until(lambda: all(r.url != gone for r in balancer.replicas), "its removal")
        await stream.stop()  # ...and then it is gone
    assert stream.errors == []
    assert set(stream.statuses) == {200}
    assert len(stream.statuses) >= 60
    balancer.gauges(balancer.tallies)
    assert balancer.tallies.replicas == {"in_service": 2, "ejected": 0, "draining": 0}
    assert sorted(balancer.tallies.replica_in_flight) == [
        f"http://{a}:{port}" for a in ADDRESSES[1:]
    ]


@pytest.mark.anyio
async def test_a_failed_or_empty_answer_changes_nothing(dnsmasq: Dnsmasq) -> None:
    seen: list[list[str]] = []
    dns = Dns(name=NAME, port=8000, interval=0.1, nameserver=dnsmasq.nameserver)
    discovery = Discovery(dns, update=seen.append)
    dnsmasq.set(NAME, ["127.0.0.5", "127.0.0.6"])
    assert await discovery.once() == ["http://127.0.0.5:8000", "http://127.0.0.6:8000"]
    dnsmasq.set(NAME, [])  # NXDOMAIN: e.g. every engine pod unready for a moment
    assert await discovery.once() == []
    assert seen == [["http://127.0.0.5:8000", "http://127.0.0.6:8000"]]

    async def broken(name: str) -> list[str]:
        raise OSError("no route to the DNS server")

    assert await Discovery(dns, update=seen.append, resolve=broken).once() == []
    assert len(seen) == 1


@pytest.mark.anyio
async def test_an_unanswering_nameserver_is_an_error_not_a_hang() -> None:
    resolve = nameserver_resolver(f"127.0.0.1:{free_port()}")  # nobody listens there
    with pytest.raises(OSError):
        await resolve(NAME)


@pytest.mark.anyio
async def test_the_system_resolver_is_the_default() -> None:
    assert "127.0.0.1" in await system_resolve("localhost")
    discovery = Discovery(Dns(name="localhost"), update=lambda urls: None)
    assert discovery.resolve is system_resolve
    assert "http://127.0.0.1:8000" in await discovery.once()


def test_replica_urls() -> None:
    assert replica_url("10.0.0.7", scheme="http", port=8000) == "http://10.0.0.7:8000"
    assert replica_url("fd00::7", scheme="https", port=443) == "https://[fd00::7]:443"


@pytest.mark.anyio
async def test_a_name_with_no_address_yet_is_503_until_it_has_one(dnsmasq: Dnsmasq) -> None:
    async with gateway_on(dnsmasq, "later." + NAME) as (port, engines, app, client):
        response = await client.post(CHAT, json=chat())
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "upstream_unavailable"
        assert "DNS" in response.json()["error"]["message"]
        assert (await client.get("/readyz")).status_code == 503
        dnsmasq.set("later." + NAME, ADDRESSES[2:])
        balancer = app.state.gateway.engines.upstream_for(None)
        await until(lambda: len(balancer.replicas) == 1, "the name to resolve")
        assert (await client.post(CHAT, json=chat())).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
    assert engines[ADDRESSES[2]].arrived == 1
