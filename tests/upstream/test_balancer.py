"""Several engine replicas: least in flight, ejection on connect failure, recovery.

The first tests drive the Balancer with fake replica clients (no HTTP); the
last ones run three real engines and the gateway on loopback ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway._types import Headers
from gateway.app.factory import create_app
from gateway.errors import (
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from gateway.routing.hint import NO_HINT, Hint
from gateway.settings import Settings, load_settings
from gateway.upstream.balancer import Balancer, Replica
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.factory import make_upstream
from tests.support.bodies import CHAT, MODEL, chat
from tests.support.configs import refused_config
from tests.support.gateways import asgi_client, gateway_settings
from tests.support.heldengine import HeldEngine, arrivals
from tests.support.servers import free_port, running_server

BODY = chat()
# The deployment's names configured (docs/fleet.md): no replica is asked for its model
# list before the first request, so each test's replicas see its requests alone.
SERVED: dict[tuple[str, ...], Any] = {("upstream", "models"): [MODEL]}


class FakeResponse:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.headers: Headers = []
        self.closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        yield b"{}"

    async def read(self, limit: int) -> bytes:
        return b"{}"

    def finish(self) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


class FakeClient:
    """A replica client whose next answers the test sets (``fail`` raises)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Headers]] = []
        self.fail: Exception | None = None
        self.status = 200
        self.closed = False

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        self.calls.append((method, path, headers))
        if self.fail is not None:
            raise self.fail
        return FakeResponse(self.status)

    async def aclose(self) -> None:
        self.closed = True


def balancer_of(count: int, **kwargs: Any) -> tuple[Balancer, list[FakeClient]]:
    clients = [FakeClient() for _ in range(count)]
    kwargs.setdefault("eject_seconds", 30.0)
    return Balancer([(f"http://r{i}", c) for i, c in enumerate(clients)], **kwargs), clients


async def send(balancer: Balancer) -> UpstreamResponse:
    return await balancer.request("POST", CHAT, headers=[], body=b"{}")


def in_flight(balancer: Balancer) -> list[int]:
    return [r.in_flight for r in balancer.replicas]


def watch(balancer: Balancer, *, back: bool) -> asyncio.Event:
    """An event set when some replica goes out (back=False) or comes back (back=True)."""
    event = asyncio.Event()

    def listener(replica: Replica) -> None:
        if replica.in_service == back:
            event.set()

    balancer.listeners.append(listener)
    return event


@pytest.mark.anyio
async def test_each_request_goes_to_the_replica_with_fewest_in_flight() -> None:
    balancer, clients = balancer_of(3)
    open_ = [await send(balancer) for _ in range(6)]
    assert in_flight(balancer) == [2, 2, 2]
    await open_[1].aclose()  # on replica 1
    await open_[4].aclose()  # on replica 1
    await open_[2].aclose()  # on replica 2
    assert in_flight(balancer) == [2, 0, 1]
    more = [await send(balancer) for _ in range(3)]
    assert in_flight(balancer) == [2, 2, 2]
    assert [len(c.calls) for c in clients] == [2, 4, 3]
    for response in open_ + more:
        await response.aclose()
        await response.aclose()  # closing twice counts once
    assert in_flight(balancer) == [0, 0, 0]


@pytest.mark.anyio
async def test_ties_go_round_the_ring() -> None:
    balancer, clients = balancer_of(3)
    for _ in range(7):
        await (await send(balancer)).aclose()
    assert [len(c.calls) for c in clients] == [3, 2, 2]


@pytest.mark.anyio
async def test_an_answer_names_the_replica_that_gave_it() -> None:
    # Traces record it (ft_gateway.upstream.replica).
    balancer, _ = balancer_of(2)
    first, second = await send(balancer), await send(balancer)
    answers: list[Any] = [first, second]  # the replica is the balancer's own addition
    assert [a.replica for a in answers] == ["http://r0", "http://r1"]
    await first.aclose()
    await second.aclose()


@pytest.mark.anyio
async def test_connect_failure_ejects_and_moves_the_request() -> None:
    balancer, clients = balancer_of(3)
    ejected = watch(balancer, back=False)
    clients[0].fail = UpstreamUnreachable("refused")
    response = await send(balancer)
    assert ejected.is_set()
    assert [len(c.calls) for c in clients] == [1, 1, 0]
    assert not balancer.replicas[0].in_service
    assert balancer.replicas[0].reason == "refused"
    assert in_flight(balancer) == [0, 1, 0]
    for _ in range(4):
        await (await send(balancer)).aclose()
    assert len(clients[0].calls) == 1  # out: no more traffic
    await response.aclose()
    await balancer.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [UpstreamTimeout("slow"), UpstreamProtocolError("dropped")],
    ids=["timeout", "dropped-after-send"],
)
async def test_failure_after_sending_is_never_retried(failure: Exception) -> None:
    balancer, clients = balancer_of(3)
    clients[0].fail = failure
    with pytest.raises(type(failure)):
        await send(balancer)
    assert [len(c.calls) for c in clients] == [1, 0, 0]
    assert balancer.replicas[0].in_service
    assert in_flight(balancer) == [0, 0, 0]


@pytest.mark.anyio
async def test_all_out_is_503_with_retry_after() -> None:
    balancer, clients = balancer_of(2, eject_seconds=7.5)
    for client in clients:
        client.fail = UpstreamUnreachable("refused")
    with pytest.raises(UpstreamUnavailable) as info:
        await send(balancer)
    assert info.value.status == 503
    assert 1 <= int(info.value.headers["Retry-After"]) <= math.ceil(7.5)
    assert [len(c.calls) for c in clients] == [1, 1]
    with pytest.raises(UpstreamUnavailable):
        await send(balancer)
    assert [len(c.calls) for c in clients] == [1, 1]  # out: not even tried
    await balancer.aclose()


@pytest.mark.anyio
async def test_replica_comes_back_after_a_passing_health_check() -> None:
    balancer, clients = balancer_of(
        2, eject_seconds=0.01, health_path="/health", probe_headers=[(b"authorization", b"k")]
    )
    back = watch(balancer, back=True)
    clients[0].fail = UpstreamUnreachable("refused")
    await (await send(balancer)).aclose()
    clients[0].status = 503
    clients[0].fail = None
    probed = asyncio.Event()
    inner = clients[0].request

    async def recovering(
        method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> Any:
        # The first probes see 503 (still out); then the engine recovers.
        if len(clients[0].calls) >= 3:
            clients[0].status = 200
            probed.set()
        return await inner(method, path, headers=headers, body=body)

    clients[0].request = recovering  # type: ignore[method-assign]
    await asyncio.wait_for(back.wait(), 30)
    assert probed.is_set()
    assert balancer.replicas[0].in_service
    probes = clients[0].calls[1:]
    assert all(p == ("GET", "/health", [(b"authorization", b"k")]) for p in probes)
    assert len(probes) >= 2
    await (await send(balancer)).aclose()
    assert clients[0].calls[-1][1] == CHAT
    await balancer.aclose()


@pytest.mark.anyio
async def test_close_stops_health_checks_and_closes_every_client() -> None:
    balancer, clients = balancer_of(2)
    clients[0].fail = UpstreamUnreachable("refused")
    await (await send(balancer)).aclose()
    task = balancer.replicas[0].recovery
    assert task is not None and not task.done()
    await balancer.aclose()
    assert task.cancelled()
    assert all(c.closed for c in clients)


def test_one_client_per_replica_from_settings() -> None:
    settings = load_settings(
        None,
        overrides={("upstream", "url"): "http://127.0.0.1:1, http://127.0.0.1:2"},
        environ={"FT_GATEWAY_UPSTREAM__EJECT_SECONDS": "3"},
    )
    made: list[Settings] = []

    def make(one: Settings) -> UpstreamClient:
        made.append(one)
        return FakeClient()

    balancer = Balancer.from_settings(settings, make)
    assert [s.upstream.url for s in made] == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert all(s.upstream.replicas == [s.upstream.url] for s in made)
    assert balancer.eject_seconds == 3
    assert settings.upstream.replicas == ["http://127.0.0.1:1", "http://127.0.0.1:2"]


def test_single_url_needs_no_balancer() -> None:
    settings = load_settings(None, environ={})
    assert not isinstance(make_upstream(settings), Balancer)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("upstream:\n  url: http://a:1\n  urls: [http://b:1]\n", "give 'url'"),
        ("upstream:\n  urls: []\n", "upstream.urls: List should have at least 1 item"),
        ("upstream:\n  urls: [http://a:1, 'b:2']\n", "upstream.urls.1: String should match"),
    ],
)
def test_bad_replica_lists(tmp_path: Path, text: str, message: str) -> None:
    assert message in str(refused_config(tmp_path, text))


def test_flag_or_environment_replaces_the_files_replicas(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("upstream:\n  urls: [http://a:1, http://b:1]\n")
    assert load_settings(config, environ={}).upstream.replicas == ["http://a:1", "http://b:1"]
    settings = load_settings(config, environ={"FT_GATEWAY_UPSTREAM": "http://c:1"})
    assert settings.upstream.replicas == ["http://c:1"]
    settings = load_settings(config, overrides={("upstream", "url"): "http://d:1,http://e:1"})
    assert settings.upstream.replicas == ["http://d:1", "http://e:1"]


# --- through the httpx client: which failures count as "nothing was sent" ---


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failure", "moved", "status"),
    [
        (httpx.ConnectError("refused"), True, 200),
        (httpx.ConnectTimeout("no answer"), True, 200),
        (httpx.ReadError("reset"), False, 502),
        (httpx.RemoteProtocolError("closed"), False, 502),
        (httpx.ReadTimeout("slow"), False, 504),
    ],
    ids=["connect-refused", "connect-timeout", "read-error", "dropped", "read-timeout"],
)
async def test_only_connect_failures_move_to_another_replica(
    failure: Exception, moved: bool, status: int
) -> None:
    seen: list[str] = []

    def engine(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        if request.url.host == "a":
            raise failure
        return httpx.Response(200, json={"ok": True})

    # Its names configured: the gateway asks no replica for its model list first.
    settings = gateway_settings("http://a:8000,http://b:8000", overrides=SERVED)
    app = create_app(settings, transport=httpx.MockTransport(engine))
    async with asgi_client(app) as client:
        response = await client.post(CHAT, json=BODY)
        balancer = app.state.gateway.engines.upstream_for(None)
        assert isinstance(balancer, Balancer)
        assert response.status_code == status
        assert seen == (["a", "b"] if moved else ["a"])
        assert balancer.replicas[0].in_service is not moved


# --- three real engines behind the real gateway ---


@contextlib.asynccontextmanager
async def gateway_over(urls: list[str], **env: str) -> AsyncIterator[tuple[str, Balancer]]:
    settings = gateway_settings(",".join(urls), environ=env, overrides=SERVED)
    app = create_app(settings)
    async with running_server(app) as url:
        balancer = app.state.gateway.engines.upstream_for(None)
        assert isinstance(balancer, Balancer)
        yield url, balancer


def fire(client: httpx.AsyncClient, count: int) -> asyncio.Task[list[int]]:
    """Send ``count`` chat requests at once; the task's result is their statuses."""

    async def run() -> list[int]:
        responses = await asyncio.gather(*(client.post(CHAT, json=BODY) for _ in range(count)))
        return [r.status_code for r in responses]

    return asyncio.create_task(run())


CLIENTS = pytest.mark.parametrize("client_kind", ["httpx", "aiohttp"])


@pytest.mark.anyio
@CLIENTS
async def test_three_engines_split_by_in_flight_then_one_dies_and_returns(
    client_kind: str,
) -> None:
    changed = asyncio.Condition()
    engines = [HeldEngine(changed) for _ in range(3)]
    ports = [free_port() for _ in engines]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    async with contextlib.AsyncExitStack() as stack:
        servers = []
        for engine, port in zip(engines, ports, strict=True):
            server = contextlib.AsyncExitStack()
            await server.enter_async_context(running_server(engine.app, port=port))
            servers.append(server)
            stack.push_async_callback(server.aclose)
        gateway, balancer = await stack.enter_async_context(
            gateway_over(
                urls,
                FT_GATEWAY_UPSTREAM__EJECT_SECONDS="0.05",
                FT_GATEWAY_UPSTREAM__CLIENT=client_kind,
            )
        )
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=gateway, timeout=60, limits=httpx.Limits(max_connections=100)
            )
        )

        # Nine at once, all held: three each.
        first = fire(client, 9)
        assert await arrivals(engines, 9) == [3, 3, 3]
        assert in_flight(balancer) == [3, 3, 3]
        # Engine 0 finishes its three: the next three all go there.
        engines[0].release()
        second = fire(client, 3)
        assert await arrivals(engines, 12) == [6, 3, 3]
        # Engines 1 and 2 finish: the next four split between them.
        engines[1].release()
        engines[2].release()
        third = fire(client, 4)
        assert await arrivals(engines, 16) == [6, 5, 5]
        for engine in engines:
            engine.hold = False
            engine.release()
        assert await first == [200] * 9
        assert await second == [200] * 3
        assert await third == [200] * 4
        assert in_flight(balancer) == [0, 0, 0]

        # Engine 1 dies: it is taken out, and every request succeeds on the others.
        out = watch(balancer, back=False)
        back = watch(balancer, back=True)
        await servers[1].aclose()
        assert await fire(client, 30) == [200] * 30
        assert out.is_set()
        assert not balancer.replicas[1].in_service
        assert engines[1].arrived == 5
        assert engines[0].arrived + engines[2].arrived == 11 + 30
        assert (await client.get("/readyz")).status_code == 200

        # It comes back on the same port: a health check puts it back in service.
        engines[1] = HeldEngine(changed)
        engines[1].hold = False
        await stack.enter_async_context(running_server(engines[1].app, port=ports[1]))
        await asyncio.wait_for(back.wait(), 60)
        assert balancer.replicas[1].in_service
        for engine in engines:
            engine.hold = True
        before = [e.arrived for e in engines]
        held = fire(client, 3)
        counts = await arrivals(engines, sum(before) + 3)
        assert [c - b for c, b in zip(counts, before, strict=True)] == [1, 1, 1]
        for engine in engines:
            engine.hold = False
            engine.release()
        assert await held == [200, 200, 200]


@pytest.mark.anyio
@CLIENTS
async def test_every_replica_down_is_503_with_retry_after(client_kind: str) -> None:
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    async with (
        gateway_over(
            urls, FT_GATEWAY_UPSTREAM__EJECT_SECONDS="30", FT_GATEWAY_UPSTREAM__CLIENT=client_kind
        ) as (gateway, balancer),
        httpx.AsyncClient(base_url=gateway, timeout=60) as client,
    ):
        response = await client.post(CHAT, json=BODY)
        assert response.status_code == 503
        assert 1 <= int(response.headers["retry-after"]) <= 30
        error = response.json()["error"]
        assert error["type"] == "upstream_error"
        assert error["code"] == "upstream_unavailable"
        assert not any(r.in_service for r in balancer.replicas)
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert "upstream" in ready.json()["reason"]


@pytest.mark.anyio
@CLIENTS
async def test_a_replica_that_drops_the_request_is_not_retried(client_kind: str) -> None:
    """The engine read the request, then hung up: it may have started, so 502."""
    dropped = asyncio.Event()

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        dropped.set()
        writer.close()

    dropper = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = dropper.sockets[0].getsockname()[1]
    good = HeldEngine(asyncio.Condition())
    good.hold = False
    async with (
        dropper,
        running_server(good.app) as good_url,
        gateway_over(
            [f"http://127.0.0.1:{port}", good_url], FT_GATEWAY_UPSTREAM__CLIENT=client_kind
        ) as (gateway, balancer),
        httpx.AsyncClient(base_url=gateway, timeout=60) as client,
    ):
        response = await client.post(CHAT, json=BODY)
        assert dropped.is_set()
        assert response.status_code == 502
        assert response.json()["error"]["code"] == "upstream_protocol_error"
        assert good.arrived == 0
        assert balancer.replicas[0].in_service
