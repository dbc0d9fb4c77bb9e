"""A gateway whose rate limits live in a real Redis, and that Redis killed mid-run or
silent: the configured behaviour (fail_open / fail_closed), counted, logged, shown in
/readyz, and no request waiting on it past its time-out."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.bodies import CHAT, chat
from tests.support.limits import auth, limited_gateway, stream_of
from tests.support.meteredengine import MeteredEngine
from tests.support.metrics import Scrape
from tests.support.redisserver import RedisServer

NO_HANG = 10  # seconds: far more than any answer takes; a hang fails the test


def redis_limits(url: str, on_failure: str, **extra: Any) -> dict[str, Any]:
    return {
        "default": {"requests_per_minute": 3, "concurrent_requests": 10},
        "store": "redis",
        "redis": {"url": url, "on_failure": on_failure, "timeout": 0.5, **extra},
    }


async def post(client: httpx.AsyncClient) -> httpx.Response:
    async with asyncio.timeout(NO_HANG):
        return await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice"))


@pytest.mark.anyio
async def test_redis_killed_mid_run_fails_open_then_limits_again(
    tmp_path: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    limits = redis_limits(redis_server.url, "fail_open", retry_interval=0.05)
    async with limited_gateway(tmp_path, limits) as client:
        before = [(await post(client)).status_code for _ in range(4)]
        redis_server.stop()
        with caplog.at_level(logging.ERROR, logger="gateway.limits"):
            during = [await post(client) for _ in range(5)]
        ready = (await client.get("/readyz")).json()
        scrape = Scrape((await client.get("/metrics")).text)
        redis_server.start()  # empty: the counts died with it
        async with asyncio.timeout(NO_HANG):
            while (await client.get("/readyz")).json()["rate_limits"]["state"] != "ok":
                await asyncio.sleep(0.02)
        after = [(await post(client)).status_code for _ in range(4)]
    assert before == [200, 200, 200, 429]
    assert [r.status_code for r in during] == [200] * 5
    assert "x-ratelimit-limit-requests" not in during[0].headers  # not counted: no figures
    assert ready["status"] == "ready"
    assert ready["rate_limits"]["state"] == "down"
    assert ready["rate_limits"]["on_failure"] == "fail_open"
    assert ready["rate_limits"]["errors"] >= 1
    assert (scrape("ft_gateway_rate_limit_store_errors_total") or 0) >= 1
    assert scrape("ft_gateway_rate_limit_store_bypassed_total") == 5
    assert [r.message for r in caplog.records].count(
        "the rate-limit store failed; letting requests through until it answers"
    ) == 1
    assert after == [200, 200, 200, 429]


@pytest.mark.anyio
async def test_redis_killed_fails_closed_with_503_and_readyz_not_ready(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with limited_gateway(tmp_path, redis_limits(redis_server.url, "fail_closed")) as client:
        assert (await post(client)).status_code == 200
        redis_server.stop()
        refused = [await post(client) for _ in range(3)]
        ready = await client.get("/readyz")
    for answer in refused:
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "rate_limiter_unavailable"
        assert answer.headers["retry-after"] == "1"
    assert ready.status_code == 503
    assert ready.json()["rate_limits"]["state"] == "down"


@pytest.mark.anyio
async def test_a_silent_redis_costs_a_request_its_time_out_and_no_more(tmp_path: Path) -> None:
    # Accepts connections and never answers (a hung server, a black-holed address).
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    limits = redis_limits(f"redis://127.0.0.1:{port}/0", "fail_open", timeout=0.05)
    try:
        async with limited_gateway(tmp_path, limits) as client:
            answers = [await post(client) for _ in range(3)]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert [a.status_code for a in answers] == [200] * 3


@pytest.mark.anyio
async def test_streams_in_flight_when_redis_dies_end_normally(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    engine = MeteredEngine()
    engine.hold = asyncio.Event()
    limits = redis_limits(redis_server.url, "fail_closed")
    async with limited_gateway(tmp_path, limits, engine) as c:
        task = asyncio.create_task(stream_of(c, max_tokens=3))
        async with asyncio.timeout(NO_HANG):
            while engine.open_streams < 1:
                await asyncio.sleep(0.005)
        redis_server.stop()
        engine.hold.set()
        async with asyncio.timeout(NO_HANG):
            data = await task
    assert data.content.endswith(b"data: [DONE]\n\n")
