"""The response store in Redis (redis.asyncio): shared by every worker and gateway pod.

One key per response (``store.key_prefix`` + id) holding the JSON record, with
Redis's own expiry (``store.ttl``). Redis errors and time-outs become
StoreUnavailable here, at the one boundary.
"""

from __future__ import annotations

import redis.asyncio as redis
from redis.exceptions import RedisError

from gateway.errors import StoreUnavailable
from gateway.responses.store import StoredResponse, unavailable, visible

# Seconds: a store that does not answer must not hold a request for long.
_TIMEOUT = 2.0


class RedisStore:
    """Responses in Redis, one key each, expiring on their own."""

    def __init__(self, url: str, *, ttl: float, prefix: str) -> None:
        self.ttl_ms = int(ttl * 1000)
        self.prefix = prefix
        self._redis = redis.Redis.from_url(
            url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT
        )

    async def put(self, record: StoredResponse) -> None:
        try:
            await self._redis.set(
                self.prefix + record.response["id"], record.dumps(), px=self.ttl_ms
            )
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def _data(self, response_id: str) -> bytes | None:
        try:
            data = await self._redis.get(self.prefix + response_id)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return data.encode() if isinstance(data, str) else data

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        return visible(await self._data(response_id), owner)

    async def delete(self, response_id: str, owner: str) -> bool:
        if visible(await self._data(response_id), owner) is None:
            return False
        try:
            return bool(await self._redis.delete(self.prefix + response_id))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def aclose(self) -> None:
        await self._redis.aclose()


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return unavailable("redis", exc)
