"""Done when: the worker processes of one ``ft-gateway serve --workers 2`` with no Redis,
and two separate ``ft-gateway serve`` processes sharing one real Redis, each let exactly
the configured requests per minute through for one key; the rest get 429 with headers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.bodies import CHAT, chat
from tests.support.limits import auth, rate_headers, write_config
from tests.support.meteredengine import MeteredEngine
from tests.support.processes import gateway_process, pin
from tests.support.redisserver import RedisServer
from tests.support.servers import running_server

LIMIT = 7


async def send_all(clients: list[httpx.AsyncClient], count: int) -> list[httpx.Response]:
    """``count`` requests of key alice, in turn over ``clients``."""
    out = []
    for i in range(count):
        client = clients[i % len(clients)]
        out.append(await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice")))
    return out


def check_exact(answers: list[httpx.Response]) -> None:
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == LIMIT, statuses
    assert statuses == [200] * LIMIT + [429] * (len(answers) - LIMIT)
    remaining = [int(a.headers["x-ratelimit-remaining-requests"]) for a in answers[:LIMIT]]
    assert remaining == list(range(LIMIT - 1, -1, -1))
    for answer in answers[LIMIT:]:
        assert rate_headers(answer)["x-ratelimit-limit-requests"] == str(LIMIT)
        assert answer.json()["error"]["code"] == "rate_limit_exceeded"
        assert int(answer.headers["retry-after"]) >= 1


@contextlib.asynccontextmanager
async def serving(
    tmp: Path, engine_url: str, limits: dict[str, Any], *, workers: int
) -> AsyncIterator[tuple[str, list[int]]]:
    """``ft-gateway serve`` with ``limits`` (config in ``tmp``): its URL and worker pids."""
    tmp.mkdir(exist_ok=True)
    write_config(tmp, engine_url, limits)
    env = {"FT_GATEWAY_SERVER__KEEP_ALIVE_TIMEOUT": "600"}
    async with gateway_process("--workers", str(workers), env=env, tmp=tmp) as gateway:
        yield await gateway.serving()


@pytest.mark.anyio
async def test_two_workers_share_one_limit_without_redis(tmp_path: Path) -> None:
    engine = MeteredEngine()
    limits = {"default": {"requests_per_minute": LIMIT}}
    async with running_server(engine) as engine_url:
        async with serving(tmp_path, engine_url, limits, workers=2) as (url, pids):
            clients = list((await pin(url, pids)).values())  # one client on each worker
            try:
                answers = await send_all(clients, LIMIT + 5)
            finally:
                for client in clients:
                    await client.aclose()
    check_exact(answers)
    assert len(engine.bodies) == LIMIT


@pytest.mark.anyio
async def test_two_gateways_share_one_limit_in_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    engine = MeteredEngine()
    limits = {
        "default": {"requests_per_minute": LIMIT},
        "store": "redis",
        "redis": {"url": redis_server.url, "timeout": 1.0, "on_failure": "fail_closed"},
    }
    async with running_server(engine) as engine_url:
        async with (
            serving(tmp_path / "a", engine_url, limits, workers=1) as (first, _),
            serving(tmp_path / "b", engine_url, limits, workers=1) as (second, _),
            httpx.AsyncClient(base_url=first) as one,
            httpx.AsyncClient(base_url=second) as two,
        ):
            answers = await send_all([one, two], LIMIT + 5)
    check_exact(answers)
    assert len(engine.bodies) == LIMIT
