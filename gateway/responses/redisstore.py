"""The response store in Redis (redis.asyncio): shared by every worker and gateway pod.

One key per response (``store.key_prefix`` + id) holding the JSON record, with
Redis's own expiry (``store.ttl``). Each owner's stored bytes are counted beside
them, by Lua scripts that change both at once: ``PREFIX owner:OWNER`` is a hash of
each of its responses' size (and the total, under ``_total``), ``... :expiry`` a
sorted set of its responses by expiry, so a response that expired is taken off the
total the next time the owner writes or its quota is read. Redis errors and
time-outs become StoreUnavailable here, at the one boundary.
"""

from __future__ import annotations

import redis.asyncio as redis
from redis.exceptions import RedisError

from gateway.errors import StoreUnavailable
from gateway.responses.store import StoredResponse, unavailable, visible

# The owner's expired responses off its total (KEYS[2] sizes, KEYS[3] expiries), by
# Redis's clock, as the records' own expiry. Shared by the scripts below.
_EXPIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, id in ipairs(gone) do
  local size = tonumber(redis.call('HGET', KEYS[2], id)) or 0
  redis.call('HDEL', KEYS[2], id)
  redis.call('HINCRBY', KEYS[2], '_total', -size)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
"""
# KEYS: record, sizes, expiries. ARGV: ttl ms, data, id. Returns the total.
_PUT = (
    _EXPIRE
    + """
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
local size = string.len(ARGV[2])
local before = tonumber(redis.call('HGET', KEYS[2], ARGV[3])) or 0
redis.call('HSET', KEYS[2], ARGV[3], size)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[1]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
return redis.call('HINCRBY', KEYS[2], '_total', size - before)
"""
)
# KEYS: record (unused), sizes, expiries. Returns the total.
_HELD = (
    _EXPIRE
    + """
return tonumber(redis.call('HGET', KEYS[2], '_total')) or 0
"""
)
# KEYS: record, sizes, expiries. ARGV: id. Returns 1 if deleted.
_DELETE = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
local size = tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[2], '_total', -size)
return 1
"""

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
        self._put = self._redis.register_script(_PUT)
        self._held = self._redis.register_script(_HELD)
        self._delete = self._redis.register_script(_DELETE)

    def _keys(self, response_id: str, owner: str) -> list[str]:
        counted = f"{self.prefix}owner:{owner}"
        return [self.prefix + response_id, counted, counted + ":expiry"]

    async def put(self, record: StoredResponse) -> int:
        response_id = record.response["id"]
        args = [self.ttl_ms, record.dumps(), response_id]
        try:
            return int(await self._put(keys=self._keys(response_id, record.owner), args=args))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def held(self, owner: str) -> int:
        try:
            return int(await self._held(keys=self._keys("", owner), args=[]))
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
            keys = self._keys(response_id, owner)
            return bool(await self._delete(keys=keys, args=[response_id]))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def aclose(self) -> None:
        await self._redis.aclose()


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return unavailable("redis", exc)
