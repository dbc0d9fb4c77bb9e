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
import hashlib
import itertools
import logging
import math
import uuid
from typing import Any

from gateway.limits.config import RedisStore as RedisConfig
from gateway.limits.gcra import CONCURRENT, DAILY, REQUESTS, TOKENS, Limit, Verdict
from gateway.limits.resp import RedisCommandError, RedisConnection, pack

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


class _Script:
    """A Lua script run by ``EVALSHA``; sent whole once when Redis does not know it
    (a new or restarted Redis), so each run is one command."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def run(
        self, redis: RedisConnection, keys: list[str], args: list[int | str], *, timeout: float
    ) -> Any:
        tail = (len(keys), *keys, *args)
        try:
            return await redis.call(pack("EVALSHA", self.sha, *tail), timeout=timeout)
        except RedisCommandError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await redis.call(pack("EVAL", self.source, *tail), timeout=timeout)


class RedisStore:
    """Counters in Redis shared by every pod; raises OSError, TimeoutError or
    RedisCommandError for the limiter to handle as configured (it never waits longer
    than ``timeout`` for a decision)."""

    kind = "redis"

    def __init__(self, config: RedisConfig) -> None:
        self.config = config
        self.redis = RedisConnection(config.url, connect_timeout=max(config.timeout, 0.05))
        self._acquire = _Script(ACQUIRE)
        self._release = _Script(RELEASE)
        self._renew = _Script(RENEW)
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
        reply = await self._acquire.run(self.redis, keys, args, timeout=self.config.timeout)
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
        if not lease and (
            used == reserved or not (limit.tokens_per_minute or limit.tokens_per_day)
        ):
            return  # nothing to settle: no round trip
        args: list[int | str] = [
            limit.tokens_per_minute or 0,
            limit.tokens_per_day or 0,
            used - reserved,
            lease,
        ]
        # After the answer, off the request's path: a little more patience.
        timeout = max(self.config.timeout, 0.05) * 10
        await self._release.run(self.redis, self._keys(bucket), args, timeout=timeout)

    def _start_renewing(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_leases())

    async def _renew_leases(self) -> None:
        while self._leases:
            await asyncio.sleep(self.config.lease_seconds / 3)
            leases = list(self._leases.items())
            if not leases:
                return
            args: list[int | str] = [int(self.config.lease_seconds * _US)]
            args.extend(i for i, _ in leases)
            try:
                await self._renew.run(self.redis, [k for _, k in leases], args, timeout=1.0)
            except (OSError, TimeoutError, RedisCommandError) as exc:
                logger.warning("cannot renew rate-limit leases in Redis: %s", exc)

    async def ping(self) -> None:
        """PING, within ten times the decision time-out."""
        await self.redis.call(pack("PING"), timeout=max(self.config.timeout, 0.05) * 10)

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
        self.redis.close()
