"""The three stores give the same decisions: this process's dict, the shared memory of
the workers of one machine (two SharedStores on one file are two workers), and a real
Redis (the Lua script). Plus the pure GCRA core's edges."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.errors import LimiterUnavailable
from gateway.limits.config import RateLimit, RateLimits
from gateway.limits.config import RedisStore as RedisConfig
from gateway.limits.gcra import Limit, acquire, release, resolve
from gateway.limits.limiter import Limiter, Store
from gateway.limits.local import LocalStore
from gateway.limits.redisstore import RedisStore
from gateway.limits.shared import SharedStore, TableFull
from tests.support.redisserver import RedisServer

Pair = tuple[Store, Store]  # two gateways (workers or pods) sharing the counters


@contextlib.asynccontextmanager
async def stores(kind: str, tmp_path: Path, redis: RedisServer) -> AsyncIterator[Pair]:
    if kind == "local":
        one = LocalStore()
        yield one, one
        return
    first: Store
    second: Store
    if kind == "shared":
        first = SharedStore(tmp_path, worker_index=0, slots=64)
        second = SharedStore(tmp_path, worker_index=1, slots=64)
    else:
        config = RedisConfig(url=redis.url, timeout=2.0)
        first, second = RedisStore(config), RedisStore(config)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


@pytest.fixture(params=["local", "shared", "redis"])
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path, redis_server: RedisServer
) -> AsyncIterator[Pair]:
    """Two gateways sharing counters, through each of the three stores."""
    async with stores(request.param, tmp_path, redis_server) as both:
        yield both


@pytest.mark.anyio
async def test_requests_per_minute_are_exact_across_the_pair(pair: Pair) -> None:
    a, b = pair
    limit = Limit(requests_per_minute=5)
    verdicts = [(await (a if i % 2 else b).acquire("k", limit, 1))[0] for i in range(8)]
    other = (await a.acquire("other", limit, 1))[0]
    assert [v.allowed for v in verdicts] == [True] * 5 + [False] * 3
    assert [v.requests_remaining for v in verdicts] == [4, 3, 2, 1, 0, 0, 0, 0]
    assert verdicts[5].refused == "requests_per_minute"
    assert 11 < verdicts[5].retry_after <= 12
    assert 59 < verdicts[5].requests_reset <= 60
    assert other.allowed and other.requests_remaining == 4


@pytest.mark.anyio
async def test_tokens_are_reserved_then_settled_on_real_usage(pair: Pair) -> None:
    a, b = pair
    # 10 a minute: one token refills every 6 s, far longer than the test takes.
    limit = Limit(tokens_per_minute=10, tokens_per_day=1000)
    first, lease = await a.acquire("k", limit, 6)
    refused = (await b.acquire("k", limit, 6))[0]
    await a.release("k", limit, reserved=6, used=1, lease=lease)
    again = (await b.acquire("k", limit, 9))[0]
    over = (await a.acquire("k", limit, 1))[0]
    never = (await a.acquire("k", limit, 11))[0]
    assert first.allowed and first.tokens_remaining == 4
    assert not refused.allowed and refused.refused == "tokens_per_minute"
    assert refused.tokens_remaining == 4
    assert again.allowed and again.tokens_remaining == 0
    assert not over.allowed
    assert never.too_large and math.isinf(never.retry_after)


@pytest.mark.anyio
async def test_a_daily_budget_and_under_reserved_usage_are_charged(pair: Pair) -> None:
    a, b = pair
    limit = Limit(tokens_per_day=100)
    _, lease = await a.acquire("k", limit, 10)
    await a.release("k", limit, reserved=10, used=70, lease=lease)  # a wrong estimate
    refused = (await b.acquire("k", limit, 40))[0]
    fits = (await b.acquire("k", limit, 30))[0]
    assert refused.refused == "tokens_per_day" and refused.retry_after > 3000
    assert fits.allowed


@pytest.mark.anyio
async def test_concurrency_is_counted_across_the_pair_until_released(pair: Pair) -> None:
    a, b = pair
    limit = Limit(concurrent_requests=2, requests_per_minute=100)
    one, lease_one = await a.acquire("k", limit, 1)
    two, _ = await b.acquire("k", limit, 1)
    third = (await a.acquire("k", limit, 1))[0]
    await a.release("k", limit, reserved=1, used=1, lease=lease_one)
    fourth = (await b.acquire("k", limit, 1))[0]
    assert one.allowed and two.allowed and two.in_flight == 2
    assert third.refused == "concurrent_requests" and third.retry_after == 1
    assert third.requests_remaining == 98  # a refusal charges nothing
    assert fourth.allowed


@pytest.mark.anyio
async def test_a_restarted_worker_clears_the_requests_its_predecessor_held(
    tmp_path: Path,
) -> None:
    limit = Limit(concurrent_requests=1)
    store = SharedStore(tmp_path, worker_index=3, slots=8)
    other = SharedStore(tmp_path, worker_index=1, slots=8)
    assert (await store.acquire("k", limit, 1))[0].allowed
    assert not (await other.acquire("k", limit, 1))[0].allowed
    # The worker dies holding it; the supervisor starts another with its index.
    replacement = SharedStore(tmp_path, worker_index=3, slots=8)
    assert (await other.acquire("k", limit, 1))[0].allowed
    for s in (store, other, replacement):
        await s.aclose()


def test_the_shared_table_reports_when_full_and_refuses_bad_indexes(tmp_path: Path) -> None:
    store = SharedStore(tmp_path, worker_index=0, slots=2)
    store._find("a")
    store._find("b")
    with pytest.raises(TableFull):
        store._find("c")
    with pytest.raises(ValueError):
        SharedStore(tmp_path, worker_index=256)


def test_resolve_lays_the_layers_over_one_another() -> None:
    default = RateLimit(requests_per_minute=10, tokens_per_minute=100)
    key = RateLimit(tokens_per_minute=5, concurrent_requests=1)
    assert resolve(default, None, key) == Limit(10, 5, None, 1)
    assert resolve(None, None) is None


def test_release_never_credits_past_a_full_bucket() -> None:
    limit = Limit(tokens_per_minute=60)
    state = [0.0, 0.0, 0.0, 0.0]
    assert acquire(state, limit, 1000.0, 30).allowed
    release(state, limit, 1000.0, reserved=30, used=0)
    assert state[1] == 1000.0 and state[3] == 0
    assert acquire(state, limit, 1000.0, 60).tokens_remaining == 0


@pytest.mark.anyio
async def test_a_key_the_full_shared_table_has_no_room_for_is_refused_alone(
    tmp_path: Path,
) -> None:
    store = SharedStore(tmp_path, worker_index=0, slots=2)
    limiter = Limiter(RateLimits(default=RateLimit(requests_per_minute=100)), store)
    for name in ("a", "b"):
        assert await limiter.admit(name, None, tokens=1) is not None
    with pytest.raises(LimiterUnavailable, match="no room for this API key"):
        await limiter.admit("c", None, tokens=1)
    # Not a store failure: the keys already there are still limited, not let through.
    assert limiter.health.down_since is None
    assert await limiter.admit("a", None, tokens=1) is not None
    await store.aclose()
