"""Refused requests count against their key, and a client that leaves is charged.

Issue 33, item 4: a request refused with a 400 (a duplicate key, malformed JSON, a
field the policy refuses, a body over the limit) was answered before the limiter
ran, so a key could send them without end, each costing the gateway a parse. Item 8:
a non-streaming request whose client left before its answer gave back its whole
reservation, though the engine did the work: repeated, it evaded token limits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.bodies import CHAT, MODEL, chat
from tests.support.gateways import Gateway, serve_gateway
from tests.support.heldengine import HeldEngine
from tests.support.limits import auth, limited_settings
from tests.support.meteredengine import MeteredEngine
from tests.support.redisserver import RedisServer
from tests.support.servers import running_server

JSON = {"content-type": "application/json", **auth("alice")}
REFUSED: list[tuple[bytes, int]] = [
    (b'{"model": "' + MODEL.encode() + b'", "messages": [], "n": 1, "n": 2}', 400),
    (b'{"model": ', 400),  # malformed
    (b'{"model": "' + MODEL.encode() + b'", "messages": [], "logprobs": true}', 400),  # policy
    (b"{" + b" " * 4096 + b"}", 413),  # past limits.max_body_bytes
]


@contextlib.asynccontextmanager
async def _gateway(
    tmp_path: Path, limits: dict[str, Any], app: Any
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    async with running_server(app) as engine_url:
        settings = limited_settings(engine_url, tmp_path, limits)
        settings.limits.max_body_bytes = 4096
        async with (
            serve_gateway(settings) as gw,
            httpx.AsyncClient(base_url=gw.url, timeout=30) as client,
        ):
            yield gw, client


def _limits(store: str, request: pytest.FixtureRequest, **default: int) -> dict[str, Any]:
    limits: dict[str, Any] = {"default": default}
    if store == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        limits |= {"store": "redis", "redis": {"url": redis.url, "timeout": 1.0}}
    return limits


@pytest.mark.anyio
@pytest.mark.parametrize("store", ["local", "redis"])
async def test_requests_refused_before_the_limiter_count_against_their_key(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    engine = MeteredEngine()
    limits = _limits(store, request, requests_per_minute=len(REFUSED))
    async with _gateway(tmp_path, limits, engine) as (_, client):
        refused = [await client.post(CHAT, content=raw, headers=JSON) for raw, _ in REFUSED]
        valid = await client.post(CHAT, json=chat(max_tokens=2), headers=auth("alice"))
        refused_again = await client.post(CHAT, content=REFUSED[0][0], headers=JSON)
    assert [r.status_code for r in refused] == [status for _, status in REFUSED]
    # Each refusal took one of the key's requests, and says so as an admitted one does.
    remaining = [r.headers.get("x-ratelimit-remaining-requests") for r in refused]
    assert remaining == [str(n) for n in range(len(REFUSED) - 1, -1, -1)]
    assert valid.status_code == 429 and valid.json()["error"]["type"] == "requests"
    # Once the key's requests are spent, a refusal is the 429 the limiter gives.
    assert refused_again.status_code == 429 and "retry-after" in refused_again.headers
    assert engine.bodies == []


@pytest.mark.anyio
async def test_a_refusal_of_an_unlimited_key_is_only_its_own_error(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with _gateway(tmp_path, {"default": {"tokens_per_minute": 100}}, engine) as (_, client):
        answers = [await client.post(CHAT, content=REFUSED[0][0], headers=JSON) for _ in range(3)]
    assert [a.status_code for a in answers] == [400] * 3
    assert all("x-ratelimit-remaining-requests" not in a.headers for a in answers)


@pytest.mark.anyio
async def test_a_client_that_leaves_before_its_answer_is_charged_its_reservation(
    tmp_path: Path,
) -> None:
    engine = HeldEngine(asyncio.Condition())
    limits = {"default": {"tokens_per_minute": 1000}}
    async with _gateway(tmp_path, limits, engine.app) as (gw, client):
        headers = {**auth("alice"), "x-request-id": "left-early"}
        left = asyncio.create_task(client.post(CHAT, json=chat(max_tokens=600), headers=headers))
        async with engine.changed:
            await engine.changed.wait_for(lambda: engine.arrived == 1)
        left.cancel()
        record = await gw.recorder.wait_for_request("left-early")
        engine.hold = False
        for waiting in engine.waiting:
            waiting.set_result(None)
        again = await client.post(CHAT, json=chat(max_tokens=600), headers=auth("alice"))
    assert record.client_disconnected and record.status == 0
    # The engine was asked for 600 tokens: they stay charged, so a second such request
    # does not fit in the minute's 1000.
    assert again.status_code == 429 and again.json()["error"]["type"] == "tokens"
    assert engine.arrived == 1
