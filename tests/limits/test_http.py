"""Rate limits and metering through a real gateway (uvicorn on loopback) in front of the
metered engine: exact requests per minute, OpenAI's 429 and headers, concurrency, token
budgets under concurrent streams, token counters equal to the engine's usage."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.app.factory import create_app
from gateway.observe.exchange import Observers
from gateway.observe.logs import AccessLog
from tests.support.bodies import CHAT, COMPLETIONS, ERROR_KEYS, chat
from tests.support.gateways import asgi_client, serve_gateway
from tests.support.limits import (
    auth,
    key_of,
    limited_gateway,
    limited_settings,
    rate_headers,
    stream_of,
)
from tests.support.meteredengine import MeteredEngine
from tests.support.metrics import Scrape
from tests.support.redisserver import RedisServer
from tests.support.sdk import sdk
from tests.support.servers import running_server


@pytest.mark.anyio
async def test_exactly_the_requests_per_minute_pass_then_429_with_headers(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with running_server(engine) as engine_url:
        settings = limited_settings(
            engine_url,
            tmp_path,
            {"default": {"requests_per_minute": 3, "tokens_per_minute": 10000}},
        )
        async with serve_gateway(settings) as gw, httpx.AsyncClient(base_url=gw.url) as client:
            gw.app.state.gateway.observer = gw.app.state.metrics
            answers = [
                await client.post(CHAT, json=chat(max_tokens=2), headers=auth("alice"))
                for _ in range(5)
            ]
            scrape = Scrape((await client.get("/metrics")).text)
    assert scrape("ft_gateway_rate_limited_total", client="alice", limit="requests_per_minute") == 2
    assert scrape("ft_gateway_client_requests_total", client="alice", status="429") == 2
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert [a.headers["x-ratelimit-remaining-requests"] for a in answers[:3]] == ["2", "1", "0"]
    for answer in answers:
        headers = rate_headers(answer)
        assert headers["x-ratelimit-limit-requests"] == "3"
        assert headers["x-ratelimit-limit-tokens"] == "10000"
    first = rate_headers(answers[0])
    assert first["x-ratelimit-reset-requests"].endswith("s")
    refused = answers[3]
    error = refused.json()["error"]
    assert set(error) == ERROR_KEYS
    assert error["code"] == "rate_limit_exceeded"
    assert error["type"] == "requests"
    assert "requests per minute" in error["message"] and "limit 3" in error["message"]
    assert int(refused.headers["retry-after"]) >= 1
    assert int(refused.headers["retry-after-ms"]) >= 1
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert len(engine.bodies) == 3  # the refused ones never reached the engine


@pytest.mark.anyio
async def test_the_openai_sdk_raises_rate_limit_error_with_the_headers(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with running_server(engine) as engine_url:
        settings = limited_settings(
            engine_url, tmp_path, {"keys": {"alice": {"requests_per_minute": 1}}}
        )
        async with serve_gateway(settings) as gw:
            client = sdk(gw.url, api_key=key_of("alice"))
            raw = await client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            assert raw.headers["x-ratelimit-remaining-requests"] == "0"
            with pytest.raises(openai.RateLimitError) as caught:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
            await client.close()
    error = caught.value
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert error.response.headers["x-ratelimit-limit-requests"] == "1"
    assert error.response.headers["retry-after"]


@pytest.mark.anyio
async def test_limits_of_a_profile_and_a_key_are_laid_over_the_default(tmp_path: Path) -> None:
    engine = MeteredEngine()
    limits = {
        "default": {"requests_per_minute": 100},
        "profiles": {"batch": {"requests_per_minute": 2, "tokens_per_minute": 5000}},
        "keys": {"nightly": {"tokens_per_minute": 9000}},
    }
    keys = {"alice": None, "bob": "batch", "nightly": "batch"}
    async with limited_gateway(tmp_path, limits, engine, keys=keys) as client:
        seen = {}
        for name in keys:
            answer = await client.post(CHAT, json=chat(max_tokens=1), headers=auth(name))
            seen[name] = rate_headers(answer)
        third = [
            (await client.post(CHAT, json=chat(max_tokens=1), headers=auth("bob"))).status_code
            for _ in range(2)
        ]
    assert seen["alice"]["x-ratelimit-limit-requests"] == "100"
    assert "x-ratelimit-limit-tokens" not in seen["alice"]
    assert seen["bob"]["x-ratelimit-limit-requests"] == "2"
    assert seen["bob"]["x-ratelimit-limit-tokens"] == "5000"
    assert seen["nightly"]["x-ratelimit-limit-requests"] == "2"
    assert seen["nightly"]["x-ratelimit-limit-tokens"] == "9000"
    assert third == [200, 429]  # bob's own two; nightly's were its own


@pytest.mark.anyio
async def test_a_request_larger_than_the_token_limit_is_refused_as_too_large(
    tmp_path: Path,
) -> None:
    engine = MeteredEngine()
    async with limited_gateway(tmp_path, {"default": {"tokens_per_minute": 100}}, engine) as client:
        answer = await client.post(CHAT, json=chat(max_tokens=500), headers=auth("alice"))
    assert answer.status_code == 429
    error = answer.json()["error"]
    assert error["type"] == "tokens"
    assert error["message"].startswith("Request too large for key 'alice' on tokens per minute")
    assert "retry-after" not in answer.headers


@pytest.mark.anyio
async def test_concurrent_requests_count_streams_until_they_end(tmp_path: Path) -> None:
    engine = MeteredEngine()
    engine.hold = asyncio.Event()
    limits = {"default": {"concurrent_requests": 2}}
    async with limited_gateway(tmp_path, limits, engine) as client:
        streams = [asyncio.create_task(stream_of(client, max_tokens=3)) for _ in range(2)]
        async with asyncio.timeout(10):
            while engine.open_streams < 2:
                await asyncio.sleep(0.005)
        refused = await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice"))
        engine.hold.set()
        done = await asyncio.gather(*streams)
        after = await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice"))
    assert refused.status_code == 429
    assert "concurrent requests" in refused.json()["error"]["message"]
    assert all(d.content.endswith(b"data: [DONE]\n\n") for d in done)
    assert after.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize("store", ["local", "redis"])
async def test_tokens_per_minute_hold_within_one_reservation_under_concurrent_streams(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    engine = MeteredEngine()
    engine.hold = asyncio.Event()
    limit = 200
    limits: dict[str, Any] = {"default": {"tokens_per_minute": limit}}
    if store == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        limits |= {"store": "redis", "redis": {"url": redis.url, "timeout": 1.0}}
    async with limited_gateway(tmp_path, limits, engine) as client:
        tasks = [asyncio.create_task(stream_of(client, max_tokens=8)) for _ in range(20)]
        async with asyncio.timeout(10):
            while engine.open_streams + sum(t.done() for t in tasks) < 20:
                await asyncio.sleep(0.005)
                if sum(t.done() for t in tasks) + engine.open_streams >= 20:
                    break
        engine.hold.set()
        statuses = [r.status_code for r in await asyncio.gather(*tasks)]
    admitted = statuses.count(200)
    assert 0 < admitted < 20
    assert set(statuses) == {200, 429}
    used = engine.reported[0] + engine.reported[1]
    # Every admitted stream was reserved whole before it started: the engine's real
    # usage of those admitted at once never passed the limit.
    assert used <= limit
    assert len(engine.bodies) == admitted


@pytest.mark.anyio
async def test_token_counters_and_access_log_match_the_engines_usage(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with running_server(engine) as engine_url:
        settings = limited_settings(
            engine_url, tmp_path, {"default": {"tokens_per_minute": 100000}}
        )
        async with serve_gateway(settings) as gw, httpx.AsyncClient(base_url=gw.url) as client:
            log = io.BytesIO()
            gw.app.state.gateway.observer = Observers(
                gw.app.state.metrics, AccessLog(log), gw.recorder
            )
            plans: list[tuple[str, dict[str, Any]]] = [
                (CHAT, chat(max_tokens=3)),
                (CHAT, chat(stream=True, max_tokens=4)),
                (CHAT, chat(stream=True, max_tokens=2, stream_options={"include_usage": True})),
                (COMPLETIONS, {"model": "m", "prompt": "one two three", "max_tokens": 5}),
                (COMPLETIONS, {"model": "m", "prompt": "a b", "stream": True, "max_tokens": 6}),
                (CHAT, chat(n=3, max_tokens=2)),
                (CHAT, chat(n=2, stream=True, max_tokens=3)),
            ]
            for path, body in plans:
                answer = await client.post(path, json=body, headers=auth("alice"))
                assert answer.status_code == 200, answer.text
            scrape = Scrape((await client.get("/metrics")).text)
    prompt, completion = engine.reported
    assert scrape("ft_gateway_client_tokens_total", client="alice", kind="prompt") == prompt
    assert scrape("ft_gateway_client_tokens_total", client="alice", kind="completion") == completion
    lines = [orjson.loads(line) for line in log.getvalue().splitlines()]
    assert sum(line["completion_tokens"] for line in lines) == completion
    assert all(
        line["total_tokens"] == line["prompt_tokens"] + line["completion_tokens"] for line in lines
    )
    # Every stream was asked for usage, the fan-outs' n engine requests too.
    assert all(
        b.get("stream_options", {}).get("include_usage") for b in engine.bodies if b.get("stream")
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "charged"), [(500, False), (400, False), (200, True)])
async def test_an_error_answer_is_charged_no_tokens_one_without_usage_its_reservation(
    status: int, charged: bool, tmp_path: Path
) -> None:
    def engine(request: httpx.Request) -> httpx.Response:
        if status == 200:  # an answer without usage
            return httpx.Response(200, json={"choices": [{"index": 0, "message": {}}]})
        return httpx.Response(status, json={"error": {"message": "no", "type": "x"}})

    settings = limited_settings("http://engine", tmp_path, {"default": {"tokens_per_minute": 1000}})
    app = create_app(settings, transport=httpx.MockTransport(engine))
    async with asgi_client(app) as client:
        remaining = []
        for _ in range(2):
            answer = await client.post(CHAT, json=chat(max_tokens=100), headers=auth("alice"))
            assert answer.status_code == status
            remaining.append(int(answer.headers["x-ratelimit-remaining-tokens"]))
    reserved = 1000 - remaining[0]
    assert reserved > 100
    # (What refills between the two requests is a few tokens, far from a reservation.)
    assert (remaining[1] < 1000 - 1.5 * reserved) is charged
