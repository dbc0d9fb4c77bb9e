"""The real servers the suite runs (scripts/services installs them) start, answer and stop."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from tests.support.redisserver import RedisServer


@pytest.mark.anyio
async def test_redis_server_answers_and_can_be_killed_and_restarted(
    redis_server: RedisServer,
) -> None:
    client = aioredis.Redis.from_url(redis_server.url, socket_timeout=0.5)
    try:
        assert await client.incr("k") == 1
        redis_server.stop()
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.incr("k")
        redis_server.start()
        assert await client.incr("k") == 1, "a restarted server starts empty"
    finally:
        await client.aclose()
