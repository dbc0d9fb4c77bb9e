"""The counters of every gateway pod, in Redis: one Lua script per decision.

``ACQUIRE`` is gcra.py's ``acquire`` written in Lua and run by ``EVALSHA``:
Redis runs a script alone, so reading and changing a key's state is one
atomic step (no read-then-write race between pods), in one round trip. The
clock is Redis's own (``TIME``), so the pods' clocks need not agree. Times
are integer microseconds (exact in a Lua double). A key's TATs live in a hash
that expires once the key is idle (a full bucket is no key); its requests in
flight are a sorted set of leases scored by their expiry: each pod renews its
live leases every third of ``lease_seconds``, so those of a pod that died are
dropped within ``lease_seconds``. ``RELEASE`` settles the tokens and removes
the lease (after the answer: not on the request's path).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import uuid
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from gateway.limits.config import RedisStore as RedisConfig
from gateway.limits.gcra import CONCURRENT, DAILY, REQUESTS, TOKENS, Limit, Verdict

logger = logging.getLogger("gateway.limits")
_US = 1_000_000
_REFUSED = {1: REQUESTS, 2: TOKENS, 3: DAILY, 4: CONCURRENT}

# KEYS: state hash, lease set. ARGV: rpm, tpm, tpd, concurrency (0: none), tokens,
# lease id, lease µs. Returns {refused (0: admitted, 1..4), wait µs (-1: never),
# requests remaining (-1: none), requests reset µs, tokens remaining, tokens reset µs,
# in flight}.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local caps = {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])}
local periods = {60000000, 60000000, 86400000000}
local costs = {1, tonumber(ARGV[5]), tonumber(ARGV[5])}
local names = {'r', 't', 'd'}
local old = redis.call('HMGET', KEYS[1], 'r', 't', 'd')
local tats, news = {}, {}
local refused, wait = 0, 0
for i = 1, 3 do
  tats[i] = tonumber(old[i]) or 0
  news[i] = tats[i]
  local cap = caps[i]
  if cap > 0 then
    if costs[i] > cap then
      if refused == 0 or wait >= 0 then refused, wait = i, -1 end
    else
      local new = math.max(tats[i], now) + costs[i] * periods[i] / cap
      news[i] = new
      local over = new - now - periods[i]
      if over > 0.001 and wait >= 0 and (refused == 0 or over > wait) then
        refused, wait = i, over
      end
    end
  end
end
local conc = tonumber(ARGV[4])
local inflight = 0
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  inflight = redis.call('ZCARD', KEYS[2])
  if refused == 0 and inflight >= conc then refused, wait = 4, 1000000 end
end
local shown = tats
if refused == 0 then
  shown = news
  local latest = now
  for i = 1, 3 do
    if caps[i] > 0 then
      redis.call('HSET', KEYS[1], names[i], string.format('%.0f', news[i]))
      latest = math.max(latest, news[i])
    end
  end
  redis.call('PEXPIREAT', KEYS[1], math.floor(latest / 1000) + 1000)
  if conc > 0 then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[7]), ARGV[6])
    redis.call('PEXPIRE', KEYS[2], math.floor(tonumber(ARGV[7]) / 1000) + 1000)
    inflight = inflight + 1
  end
end
local function remaining(i)
  if caps[i] <= 0 then return -1 end
  local left = (periods[i] - math.max(shown[i] - now, 0)) * caps[i] / periods[i]
  return math.max(0, math.floor(left + 0.000001))
end
return {refused, string.format('%.0f', wait), remaining(1),
  string.format('%.0f', math.max(shown[1] - now, 0)), remaining(2),
  string.format('%.0f', math.max(shown[2] - now, 0)), inflight}
"""

# KEYS: state hash, lease set. ARGV: tpm, tpd, used - reserved, lease id.
RELEASE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local diff = tonumber(ARGV[3])
local caps = {tonumber(ARGV[1]), tonumber(ARGV[2])}
local periods = {60000000, 86400000000}
local names = {'t', 'd'}
if diff ~= 0 then
  local latest = now
  for i = 1, 2 do
    if caps[i] > 0 then
      local tat = tonumber(redis.call('HGET', KEYS[1], names[i])) or now
      local new = math.max(tat + diff * periods[i] / caps[i], now)
      redis.call('HSET', KEYS[1], names[i], string.format('%.0f', new))
      latest = math.max(latest, new)
    end
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then
    local ttl = redis.call('PTTL', KEYS[1])
    redis.call('PEXPIREAT', KEYS[1], math.floor(math.max(latest / 1000 + 1000, now / 1000 + ttl)))
  end
end
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[2], ARGV[4]) end
return 1
"""

# KEYS: lease sets; ARGV: lease µs, then for each key its lease id.
RENEW = """
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
for i, key in ipairs(KEYS) do redis.call('ZADD', key, 'XX', expiry, ARGV[i + 1]) end
return #KEYS
"""


def _int(value: Any) -> int:
    return int(value)


class RedisStore:
    """Counters in Redis shared by every pod; raises redis/OS/timeout errors for the
    limiter to handle as configured (it never waits longer than ``timeout``)."""

    kind = "redis"

    def __init__(self, config: RedisConfig) -> None:
        self.config = config
        self.client = aioredis.Redis.from_url(
            config.url,
            socket_connect_timeout=max(config.timeout, 0.05),
            socket_timeout=None,
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._acquire = self.client.register_script(ACQUIRE)
        self._release = self.client.register_script(RELEASE)
        self._renew = self.client.register_script(RENEW)
        self._pod = uuid.uuid4().hex[:12]
        self._ids = itertools.count()
        self._leases: dict[str, str] = {}  # lease id -> its set's key
        self._renewer: asyncio.Task[None] | None = None

    def _keys(self, bucket: str) -> list[str]:
        prefix = self.config.key_prefix
        return [f"{prefix}{{{bucket}}}", f"{prefix}{{{bucket}}}:leases"]

    async def acquire(self, bucket: str, limit: Limit, tokens: int) -> tuple[Verdict, str]:
        lease = f"{self._pod}:{next(self._ids)}" if limit.concurrent_requests else ""
        keys = self._keys(bucket)
        args: list[int | str] = [
            limit.requests_per_minute or 0,
            limit.tokens_per_minute or 0,
            limit.tokens_per_day or 0,
            limit.concurrent_requests or 0,
            tokens,
            lease,
            int(self.config.lease_seconds * _US),
        ]
        async with asyncio.timeout(self.config.timeout):
            reply = await self._acquire(keys=keys, args=args)
        refused, wait, r_left, r_reset, t_left, t_reset, inflight = map(_int, reply)
        if lease and not refused:
            self._leases[lease] = keys[1]
            self._start_renewing()
        never = wait < 0
        return Verdict(
            allowed=refused == 0,
            refused=_REFUSED.get(refused),
            retry_after=math.inf if never else wait / _US,
            too_large=never,
            requests_remaining=None if r_left < 0 else r_left,
            requests_reset=r_reset / _US,
            tokens_remaining=None if t_left < 0 else t_left,
            tokens_reset=t_reset / _US,
            in_flight=inflight,
        ), lease

    async def release(
        self, bucket: str, limit: Limit, *, reserved: int, used: int, lease: str
    ) -> None:
        self._leases.pop(lease, None)
        args: list[int | str] = [
            limit.tokens_per_minute or 0,
            limit.tokens_per_day or 0,
            used - reserved,
            lease,
        ]
        async with asyncio.timeout(max(self.config.timeout, 0.05) * 10):
            await self._release(keys=self._keys(bucket), args=args)

    def _start_renewing(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_leases())

    async def _renew_leases(self) -> None:
        while self._leases:
            await asyncio.sleep(self.config.lease_seconds / 3)
            leases = list(self._leases.items())
            if not leases:
                return
            try:
                async with asyncio.timeout(1.0):
                    renew: list[int | str] = [int(self.config.lease_seconds * _US)]
                    renew.extend(i for i, _ in leases)
                    await self._renew(keys=[k for _, k in leases], args=renew)
            except (OSError, TimeoutError, aioredis.RedisError, NoScriptError) as exc:
                logger.warning("cannot renew rate-limit leases in Redis: %s", exc)

    async def ping(self) -> None:
        async with asyncio.timeout(max(self.config.timeout, 0.05) * 10):
            await self.client.ping()

    def status(self) -> dict[str, Any]:
        return {"store": self.kind}

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
        await self.client.aclose()
