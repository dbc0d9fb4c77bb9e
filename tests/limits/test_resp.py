"""The limiter's pipelined Redis connection against a real redis-server: many commands in
flight on one connection, AUTH and SELECT from the URL, error replies, a time-out that
leaves the connection usable, three in a row that close it, a lost connection."""

from __future__ import annotations

import asyncio

import pytest

from gateway.limits.config import RedisStore as RedisConfig
from gateway.limits.gcra import Limit
from gateway.limits.redisstore import RedisStore
from gateway.limits.resp import RedisCommandError, RedisConnection, pack
from tests.support.polling import until
from tests.support.redisserver import RedisServer


@pytest.mark.anyio
async def test_many_commands_share_one_connection_in_order(redis_server: RedisServer) -> None:
    redis = RedisConnection(redis_server.url, connect_timeout=1)
    replies = await asyncio.gather(
        *(redis.call(pack("ECHO", f"m{i}"), timeout=5) for i in range(200))
    )
    assert replies == [f"m{i}".encode() for i in range(200)]
    assert redis.opened == 1
    with pytest.raises(RedisCommandError, match="unknown command"):
        await redis.call(pack("NOSUCHCOMMAND"), timeout=5)
    assert await redis.call(pack("PING"), timeout=5) == b"PONG"
    redis.close()


@pytest.mark.anyio
async def test_password_and_database_come_from_the_url(redis_server: RedisServer) -> None:
    admin = RedisConnection(redis_server.url, connect_timeout=1)
    await admin.call(pack("CONFIG", "SET", "requirepass", "s3cret"), timeout=5)
    admin.close()
    url = f"redis://:s3cret@127.0.0.1:{redis_server.port}/2"
    redis = RedisConnection(url, connect_timeout=1)
    await redis.call(pack("SET", "where", "db2"), timeout=5)
    assert await redis.call(pack("CLIENT", "INFO"), timeout=5)
    info = (await redis.call(pack("CLIENT", "INFO"), timeout=5)).decode()
    assert " db=2 " in info
    redis.close()
    with pytest.raises(RedisCommandError, match="NOAUTH|Authentication"):
        plain = RedisConnection(redis_server.url, connect_timeout=1)
        try:
            await plain.call(pack("GET", "where"), timeout=5)
        finally:
            plain.close()


@pytest.mark.anyio
async def test_time_outs_then_a_lost_connection(redis_server: RedisServer) -> None:
    redis = RedisConnection(redis_server.url, connect_timeout=1)
    # Past its time-out a caller gives up; the reply that comes later is skipped.
    with pytest.raises(TimeoutError):
        await redis.call(pack("BLPOP", "nothing", "0.2"), timeout=0.01)
    assert await redis.call(pack("PING"), timeout=5) == b"PONG"
    first = redis.opened
    for _ in range(3):
        with pytest.raises(TimeoutError):
            await redis.call(pack("BLPOP", "nothing", "0.2"), timeout=0.01)
    assert await redis.call(pack("PING"), timeout=5) == b"PONG"
    assert redis.opened == first + 1  # three in a row: closed and opened again
    waiting = asyncio.ensure_future(redis.call(pack("BLPOP", "nothing", "5"), timeout=5))
    await asyncio.sleep(0)
    redis_server.stop()
    with pytest.raises(ConnectionError):
        await waiting
    with pytest.raises(OSError):
        await redis.call(pack("PING"), timeout=1)
    redis.close()


@pytest.mark.anyio
async def test_live_leases_are_renewed_and_a_dead_pods_expire(redis_server: RedisServer) -> None:
    config = RedisConfig(url=redis_server.url, timeout=2.0, lease_seconds=0.3)
    limit = Limit(concurrent_requests=1)
    live, dead = RedisStore(config), RedisStore(config)
    redis = RedisConnection(redis_server.url, connect_timeout=1)
    leases = live._keys("k")[1]
    verdict, lease = await live.acquire("k", limit, 1)
    assert verdict.allowed
    first = float(await redis.call(pack("ZSCORE", leases, lease), timeout=5))
    async with asyncio.timeout(10):  # renewed every lease_seconds / 3
        while float(await redis.call(pack("ZSCORE", leases, lease), timeout=5)) == first:
            await asyncio.sleep(0.02)
    assert not (await dead.acquire("k", limit, 1))[0].allowed
    await live.release("k", limit, reserved=1, used=1, lease=lease)
    verdict, _ = await dead.acquire("k", limit, 1)
    assert verdict.allowed
    await dead.aclose()  # a pod that dies: nothing renews its lease
    async with asyncio.timeout(10):
        while not (await live.acquire("k", limit, 1))[0].allowed:
            await asyncio.sleep(0.02)
    await live.aclose()
    redis.close()


@pytest.mark.anyio
async def test_a_connection_that_opens_after_its_caller_gave_up_is_kept(
    redis_server: RedisServer,
) -> None:
    # A burst of decisions on a loaded machine: the caller's time-out passes while the
    # connection is still opening (here its SELECT waits on a paused Redis). The
    # connection that opens after must be the one the next call uses, not left open to
    # no one while another is opened.
    admin = RedisConnection(redis_server.url, connect_timeout=1)
    await admin.call(pack("CLIENT", "PAUSE", "300", "ALL"), timeout=5)
    redis = RedisConnection(f"redis://127.0.0.1:{redis_server.port}/1", connect_timeout=5)
    try:
        with pytest.raises(TimeoutError):
            await redis.call(pack("PING"), timeout=0.05)
        opening = redis._opening
        assert opening is not None
        await until(opening.done, "the connection to open")
        assert await redis.call(pack("PING"), timeout=5) == b"PONG"
        assert redis.opened == 1
    finally:
        redis.close()
        admin.close()
