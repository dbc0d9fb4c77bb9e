"""/metrics after a known sequence of requests, and the in-flight gauges on a real server."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from gateway.app.factory import create_app
from gateway.observe.exchange import Exchange, Observers
from gateway.observe.metrics import OTHER, Metrics, Tallies, families
from gateway.settings import Settings
from tests.support.bodies import CHAT, COMPLETIONS, MESSAGES, without_fingerprint
from tests.support.gateways import Recorder, asgi_client, gateway_settings
from tests.support.metrics import Scrape
from tests.support.paths import POLICY
from tests.support.servers import running_server

SSE = [b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n', b"data: [DONE]\n\n"]


def labels(**kv: str) -> frozenset[tuple[str, str]]:
    return frozenset(kv.items())


def engine(request: httpx.Request) -> httpx.Response:
    """Behaves according to the request's model."""
    if request.method == "GET":
        return httpx.Response(200, json={"object": "list", "data": []})
    model = json.loads(request.content)["model"]
    if model == "busy":
        return httpx.Response(503, json={"error": {"message": "overloaded"}})
    if model == "down":
        raise httpx.ConnectError("refused", request=request)
    sse = {"content-type": "text/event-stream"}
    if model == "stream":
        return httpx.Response(200, headers=sse, content=b"".join(SSE))
    if model == "cut":
        return httpx.Response(200, headers=sse, content=SSE[0])
    return httpx.Response(200, json={"id": "x", "choices": []})


# The model labels are the config's names (observe/modelnames.py): these name them.
NAMED: dict[tuple[str, ...], Any] = {
    ("model_access",): {"keys": {"metrics-test": ["ok", "busy", "down", "stream", "cut"]}}
}


@pytest.fixture
def settings() -> Settings:
    return gateway_settings(overrides={("log", "requests"): False, **NAMED})


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, transport=httpx.MockTransport(engine))) as c:
        yield c


async def post(client: httpx.AsyncClient, route: str, **body: Any) -> httpx.Response:
    return await client.post(route, json=body)


@pytest.mark.anyio
async def test_metrics_after_a_known_sequence(client: httpx.AsyncClient) -> None:
    statuses = [
        (
            await post(
                client,
                CHAT,
                model="ok",
                messages=MESSAGES,
                user="u",
                logprobs=False,
                max_completion_tokens=5,
            )
        ),
        (await post(client, CHAT, model="ok", messages=MESSAGES, logprobs=True)),
        (await post(client, CHAT, model="ok", messages=MESSAGES, logprobs=True, n=3)),
        (await post(client, COMPLETIONS, model="ok", prompt="hi")),
        (await post(client, CHAT, model="busy", messages=MESSAGES)),
        (await post(client, CHAT, model="down", messages=MESSAGES)),
        (await post(client, CHAT, model="stream", messages=MESSAGES, stream=True)),
        (await post(client, CHAT, model="cut", messages=MESSAGES, stream=True)),
        (await client.get("/v1/models")),
    ]
    assert [r.status_code for r in statuses] == [200, 400, 400, 200, 503, 502, 200, 200, 200]
    response = await client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=")
    m = Scrape(response.text)

    assert m.labelled("ft_gateway_requests_total") == {
        labels(route=CHAT, model="ok", status="200"): 1,
        labels(route=CHAT, model="ok", status="400"): 2,
        labels(route=COMPLETIONS, model="ok", status="200"): 1,
        labels(route=CHAT, model="busy", status="503"): 1,
        labels(route=CHAT, model="down", status="502"): 1,
        labels(route=CHAT, model="stream", status="200"): 1,
        labels(route=CHAT, model="cut", status="200"): 1,
        labels(route="/v1/models", model="", status="200"): 1,
    }
    assert m.labelled("ft_gateway_policy_decisions_total") == {
        labels(route=CHAT, field="logprobs", action="neutral"): 1,
        labels(route=CHAT, field="user", action="stripped"): 1,
        labels(route=CHAT, field="max_completion_tokens", action="renamed"): 1,
        labels(route=CHAT, field="logprobs", action="rejected"): 2,
        # Counted even though logprobs made the request a 400.
        labels(route=CHAT, field="n", action="fanout"): 1,
    }
    assert m.labelled("ft_gateway_upstream_errors_total") == {
        labels(kind="engine_5xx"): 1,
        labels(kind="upstream_unreachable"): 1,
        labels(kind="upstream_protocol_error"): 1,  # the stream the engine cut short
    }
    # Forwarded: chat ok, busy, down, stream, cut; one completion; the models list.
    latency = "ft_gateway_upstream_latency_seconds_count"
    assert m(latency, route=CHAT) == 5
    assert m(latency, route=COMPLETIONS) == 1
    assert m(latency, route="/v1/models") == 1
    assert m("ft_gateway_upstream_ttfb_seconds_count", route=CHAT) == 4  # not "down"
    assert m("ft_gateway_upstream_latency_seconds_bucket", route=CHAT, le="+Inf") == 5
    assert m("ft_gateway_requests_in_flight") == 0
    assert m("ft_gateway_streams_in_flight") == 0
    assert m("ft_gateway_client_disconnects_total", route=CHAT) is None

    readyz = (await client.get("/readyz")).json()
    assert m.labelled("ft_gateway_policy_info") == {
        labels(path=str(POLICY), sha256=readyz["policy"]["sha256"]): 1
    }
    assert m("ft_gateway_policy_reloads_total", result="loaded") == 0
    assert m("ft_gateway_policy_reloads_total", result="failed") == 0
    loaded_at = datetime.fromisoformat(readyz["policy"]["loaded_at"])
    assert m("ft_gateway_policy_loaded_timestamp_seconds") == loaded_at.timestamp()


@pytest.mark.anyio
async def test_each_app_has_its_own_registry(settings: Settings) -> None:
    apps = [create_app(settings, transport=httpx.MockTransport(engine)) for _ in range(2)]
    async with asgi_client(apps[0]) as c:
        await post(c, CHAT, model="ok", messages=MESSAGES)
    counts = [
        Scrape(a.state.metrics.render().decode())(
            "ft_gateway_requests_total", route=CHAT, model="ok", status="200"
        )
        for a in apps
    ]
    assert counts == [1, None]


def test_model_labels_are_the_config_s_names_only() -> None:
    metrics = Metrics()
    metrics.name_models(["model-0", "model-0" + "x" * 500])
    for i in range(100):
        exchange = Exchange("POST", CHAT, CHAT, "r", model=f"model-{i}", status=200)
        metrics.started(exchange)
        metrics.finished(exchange)
    metrics.finished(Exchange("POST", CHAT, CHAT, "r", model="model-0" + "x" * 500, status=200))
    m = Scrape(metrics.render().decode())
    models = {dict(k)["model"] for k in m.labelled("ft_gateway_requests_total")}
    assert models == {"model-0", "model-0" + "x" * 93, OTHER}
    assert m("ft_gateway_requests_total", route=CHAT, model=OTHER, status="200") == 99


@pytest.mark.anyio
async def test_in_flight_gauges_and_hang_ups_on_a_real_server(settings: Settings) -> None:
    release = anyio.Event()
    engine_closed = anyio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield SSE[0]
            await release.wait()
            yield SSE[1]
        finally:
            engine_closed.set()

    async def held_engine(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())

    settings.upstream.models = ["m"]  # the engine holds every answer, a model list too
    app = create_app(settings, transport=httpx.MockTransport(held_engine))
    done = Recorder()
    app.state.gateway.observer = Observers(app.state.gateway.observer, done)
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        for hang_up in (False, True):
            request_id = f"hang-up-{hang_up}"
            headers = {"x-request-id": request_id}
            async with client.stream("POST", CHAT, json=body, headers=headers) as response:
                received = response.aiter_raw()
                assert without_fingerprint(await received.__anext__()) == SSE[0]
                m = Scrape((await client.get("/metrics")).text)
                assert m("ft_gateway_requests_in_flight") == 1
                assert m("ft_gateway_streams_in_flight") == 1
                if not hang_up:
                    release.set()
                    assert [c async for c in received] == [SSE[1]]
            # Leaving the block early closes the connection: the client hung up.
            await done.wait_for_request(request_id)
            if hang_up:
                await engine_closed.wait()
            m = Scrape((await client.get("/metrics")).text)
            assert m("ft_gateway_requests_in_flight") == 0
            assert m("ft_gateway_streams_in_flight") == 0
            assert (m("ft_gateway_client_disconnects_total", route=CHAT) or 0) == int(hang_up)
            release = anyio.Event()
            engine_closed = anyio.Event()
    assert [e.client_disconnected for e in done.finished_exchanges[-2:]] == [False, True]


def test_histogram_buckets_and_merged_tallies() -> None:
    workers = [Metrics(), Metrics()]
    for metrics in workers:
        metrics.name_models(["m"])
    for metrics, ttfb in ((workers[0], 0.3), (workers[1], 0.3), (workers[1], 7.0)):
        exchange = Exchange("POST", CHAT, CHAT, "r", model="m", status=200, upstream_status=200)
        metrics.started(exchange)
        exchange.upstream_started = time.perf_counter()
        exchange.first_byte = exchange.upstream_started + ttfb
        metrics.finished(exchange)
    merged = Tallies()
    for metrics in workers:
        merged.merge(metrics.snapshot())

    class Merged:
        def collect(self) -> Iterator[Metric]:
            return families(merged)

    registry = CollectorRegistry()
    registry.register(Merged())
    m = Scrape(generate_latest(registry).decode())
    bucket = "ft_gateway_upstream_ttfb_seconds_bucket"
    assert [m(bucket, route=CHAT, le=le) for le in ("0.25", "0.5", "5.0", "10.0", "+Inf")] == [
        0,
        2,
        2,
        3,
        3,
    ]
    assert m("ft_gateway_upstream_ttfb_seconds_sum", route=CHAT) == pytest.approx(7.6)
    assert m("ft_gateway_requests_total", route=CHAT, model="m", status="200") == 3
    assert m("ft_gateway_requests_in_flight") == 0
