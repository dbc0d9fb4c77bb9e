"""Metrics added up across workers, and /metrics on a port of its own."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.observe.metrics import Histogram, Metrics, Tallies
from gateway.observe.workermetrics import (
    WorkerMetrics,
    decode_tallies,
    encode_tallies,
    mark_worker_dead,
)
from tests.support.bodies import CHAT
from tests.support.gateways import gateway_settings
from tests.support.metrics import Scrape
from tests.support.servers import free_port, running_server


def tallies(requests: int, *, in_flight: int = 0) -> Tallies:
    hist = Histogram()
    for _ in range(requests):
        hist.observe(0.2)
    return Tallies(
        requests={(CHAT, "m", 200): requests, (CHAT, "", 400): 1},
        decisions={(CHAT, "n", "rejected"): 1},
        latency={CHAT: hist},
        ttfb={CHAT: hist},
        upstream_errors={"upstream_timeout": 1},
        disconnects={CHAT: 1},
        reloads={"loaded": 1, "unchanged": 0, "failed": 0},
        in_flight=in_flight,
        streams_in_flight=in_flight,
        policy=("p.yaml", "abc", 1.5),
        clients={("alice", 200): requests},
        tokens={(CHAT, "m", "prompt"): 5 * requests},
        client_tokens={("alice", "total"): 7 * requests},
        usage_missing={CHAT: 1},
        rate_limited={("alice", "tokens_per_minute"): 2},
        limit_store_errors=3,
        limit_store_bypassed=4,
    )


class FakeMetrics(Metrics):
    """Metrics whose snapshot is set by the test."""

    def __init__(self, t: Tallies) -> None:
        super().__init__()
        self.fixed = t

    def snapshot(self) -> Tallies:
        return self.fixed


def requests_ok(text: str) -> float | None:
    return Scrape(text)("ft_gateway_requests_total", route=CHAT, model="m", status="200")


def test_tallies_survive_the_round_trip() -> None:
    original = tallies(3, in_flight=2)
    copy = decode_tallies(encode_tallies(original))
    assert copy.requests == original.requests
    assert copy.decisions == original.decisions
    assert copy.latency[CHAT].counts == original.latency[CHAT].counts
    assert copy.latency[CHAT].total == original.latency[CHAT].total
    assert (copy.in_flight, copy.streams_in_flight, copy.policy) == (2, 2, ("p.yaml", "abc", 1.5))
    assert (copy.tokens, copy.client_tokens) == (original.tokens, original.client_tokens)
    assert (copy.usage_missing, copy.rate_limited) == (
        original.usage_missing,
        original.rate_limited,
    )
    assert (copy.limit_store_errors, copy.limit_store_bypassed) == (3, 4)
    assert copy.reloads == original.reloads
    assert copy.clients == original.clients


@pytest.mark.parametrize("raw", [b"{}", b"[", b'{"requests": [[1]]}'])
def test_malformed_snapshots_are_refused(raw: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        decode_tallies(raw)


@pytest.mark.anyio
async def test_a_scrape_adds_up_live_and_dead_workers(tmp_path: Path) -> None:
    one = WorkerMetrics(FakeMetrics(tallies(3, in_flight=1)), tmp_path, pid=101)
    two = WorkerMetrics(FakeMetrics(tallies(4, in_flight=2)), tmp_path, pid=102)
    dead = WorkerMetrics(FakeMetrics(tallies(5, in_flight=7)), tmp_path, pid=103)
    async with one.serving(), two.serving():
        async with dead.serving():
            pass  # it wrote its last counts on the way out
        mark_worker_dead(tmp_path, 103)
        assert (tmp_path / "dead-103.json").exists()
        for worker in (one, two):
            merged = await worker.merged()
            assert merged.requests[(CHAT, "m", 200)] == 3 + 4 + 5
            assert merged.requests[(CHAT, "", 400)] == 3
            assert merged.latency[CHAT].counts == [
                a + b + c
                for a, b, c in zip(
                    tallies(3).latency[CHAT].counts,
                    tallies(4).latency[CHAT].counts,
                    tallies(5).latency[CHAT].counts,
                    strict=True,
                )
            ]
            assert merged.in_flight == 1 + 2  # a dead worker has nothing in flight
            assert merged.reloads["loaded"] == 3
            assert merged.clients[("alice", 200)] == 12
            assert requests_ok((await worker.render()).decode()) == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["101.json", "102.json", "dead-103.json"]


@pytest.mark.anyio
async def test_a_worker_that_crashed_is_read_from_its_last_file(tmp_path: Path) -> None:
    live = WorkerMetrics(FakeMetrics(tallies(1)), tmp_path, pid=201)
    (tmp_path / "202.json").write_bytes(encode_tallies(tallies(6, in_flight=3)))
    (tmp_path / "202.sock").write_bytes(b"")  # left behind: nobody answers there
    (tmp_path / "garbage.json").write_bytes(b"not json")
    async with live.serving():
        merged = await live.merged()
    assert merged.requests[(CHAT, "m", 200)] == 7
    assert merged.in_flight == 0


@pytest.mark.anyio
async def test_metrics_on_their_own_port() -> None:
    port = free_port()
    settings = gateway_settings(overrides={("listen", "metrics_port"): port})
    app = create_app(settings, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    async with (
        running_server(app) as url,
        httpx.AsyncClient(timeout=30) as client,
    ):
        assert (await client.get(f"{url}/metrics")).status_code == 404
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        assert "ft_gateway_requests_in_flight" in response.text
        assert (await client.get(f"http://127.0.0.1:{port}/v1/models")).status_code == 404
    with contextlib.suppress(httpx.ConnectError):
        async with httpx.AsyncClient(timeout=5) as client:
            await client.get(f"http://127.0.0.1:{port}/metrics")
            raise AssertionError("the metrics port outlived the app")


@pytest.mark.anyio
async def test_metrics_port_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    settings = gateway_settings(
        overrides={("listen", "metrics_port"): port},
        environ={"FT_GATEWAY_AUTH__KEYS_ENV": "GW_TEST_KEYS"},
    )
    monkeypatch.setenv("GW_TEST_KEYS", "a:" + "0" * 64)
    app = create_app(settings, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    async with running_server(app) as url, httpx.AsyncClient(timeout=30) as client:
        assert (await client.get(f"{url}/v1/models")).status_code == 401
        assert (await client.get(f"http://127.0.0.1:{port}/metrics")).status_code == 200
