"""The proxy's limiter: which limits a key has, admitting a request, settling it.

``admit`` runs before the engine is called: it reserves the request's worst
case in tokens (``reservation``) and takes a concurrency slot, or raises the
429. ``settle`` runs when the answer has ended (a stream's last byte, a
client that left): the tokens the engine reported replace the reservation,
and the slot is freed. When an answer that started well reported no usage
(a stream cut short or left by its client, an engine that ignores
include_usage) the reservation stays charged: a budget is never credited
with tokens nobody counted. An answer that is an error status (the engine's
or the gateway's) generated nothing and is charged nothing.

With ``store: redis``, a failed or slow Redis (past ``redis.timeout``) makes
the limiter fail open (admit, unlimited) or closed (503) for
``redis.retry_interval`` seconds before it tries again, so no request waits
on a dead Redis more than once per interval; each failure is counted and the
change of state is logged once.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gateway.errors import LimiterUnavailable
from gateway.limits.config import ModelLimits, RateLimits
from gateway.limits.gcra import Limit, Verdict, resolve
from gateway.limits.headers import rate_headers, refusal
from gateway.limits.local import LocalStore
from gateway.limits.meter import Usage
from gateway.limits.redisstore import RedisStore
from gateway.limits.resp import RedisCommandError
from gateway.limits.shared import SharedStore, TableFull

logger = logging.getLogger("gateway.limits")
ANONYMOUS = "(no key)"  # the one bucket of every request when API keys are off
_STORE_ERRORS = (OSError, TimeoutError, RedisCommandError)
BYTES_PER_TOKEN = 4  # prompt estimate: tokenizers average ~4 bytes of English per token


class Store(Protocol):
    """Where the counters live (local.py, shared.py, redisstore.py)."""

    kind: str

    async def acquire(self, bucket: str, limit: Limit, tokens: int) -> tuple[Verdict, str]: ...

    async def release(
        self, bucket: str, limit: Limit, *, reserved: int, used: int, lease: str
    ) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class Ticket:
    """An admitted request's hold on its key's limits."""

    bucket: str
    limit: Limit
    reserved: int
    lease: str
    headers: list[tuple[bytes, bytes]]
    counted: bool = True  # False: admitted without the store (fail_open)
    also: tuple[Ticket, ...] = ()  # the holds on the request's model's limits


@dataclass
class StoreHealth:
    """Whether the store answers, for /readyz and the metrics."""

    down_since: float | None = None
    retry_at: float = 0.0
    errors: int = 0
    last_error: str | None = None
    bypassed: int = 0  # decisions taken without the store (fail_open / fail_closed)


def reservation(
    body: dict[str, Any],
    *,
    body_bytes: int,
    default_max_tokens: int,
    n: int,
    fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens"),
) -> int:
    """The most tokens a request can use, as far as the gateway can tell before the
    engine answers: the prompt estimated from the body's size, plus the first of the
    route's limit ``fields`` set (or ``default_max_tokens``) for each of the ``n`` choices.
    A route that generates nothing (embeddings, rerank: no ``fields``) reserves its
    input alone."""
    limit = default_max_tokens if fields else 0
    for name in fields:
        value = body.get(name)
        if type(value) is int and value >= 1:
            limit = value
            break
    asked = body.get("n")
    choices = n if n > 1 else (asked if type(asked) is int and asked > 1 else 1)
    return math.ceil(body_bytes / BYTES_PER_TOKEN) + limit * choices


class Limiter:
    """The limits of every key, over one store."""

    def __init__(self, config: RateLimits, store: Store) -> None:
        self.config = config
        self.store = store
        self.health = StoreHealth()
        self._limits: dict[tuple[str | None, str | None], Limit | None] = {}

    def reconfigure(self, config: RateLimits) -> None:
        """New limits (a reload), the same store: requests in flight keep theirs."""
        self.config = config
        self._limits = {}

    def limit_for(self, client: str | None, profile: str | None) -> Limit | None:
        """The limits of the key named ``client`` with ``profile``: default, then the
        profile's, then the key's own, laid over one another (None: unlimited)."""
        found = self._limits.get((client, profile), ...)
        if found is ...:
            config = self.config
            found = resolve(
                config.default,
                config.profiles.get(profile) if profile is not None else None,
                config.keys.get(client) if client is not None else None,
            )
            self._limits[(client, profile)] = found
        return found

    async def admit(
        self, client: str | None, profile: str | None, *, tokens: int, model: str | None = None
    ) -> Ticket | None:
        """Admit one request reserving ``tokens``: its Ticket (None if the key has no
        limits), or RateLimited (429) / LimiterUnavailable (503, failing closed). With
        limits on ``model``, its per-key and total counters admit it too."""
        limit = self.limit_for(client, profile)
        bucket = client if client is not None else ANONYMOUS
        ticket = await self._take(bucket, limit, tokens, client) if limit is not None else None
        models = self.config.models
        if not models or model is None or model not in models:
            return ticket
        taken: list[Ticket] = []
        try:
            for name, layer in self._model_buckets(model, bucket, models[model]):
                taken.append(await self._take(name, layer, tokens, client, model))
        except BaseException:
            for held in (ticket, *taken) if ticket is not None else taken:
                await self.settle(held, None, status=0)
            raise
        if ticket is None:
            ticket = taken.pop(0)
        ticket.also = tuple(taken)
        return ticket

    async def charge(self, client: str | None, profile: str | None) -> list[tuple[bytes, bytes]]:
        """Count a request refused before admission (a 4xx after authentication) as one
        request of its key's ``requests_per_minute``: its rate-limit headers, or
        RateLimited once the key's requests are spent. A store that fails or is full
        leaves the refusal as it was."""
        limit = self.limit_for(client, profile)
        if limit is None or limit.requests_per_minute is None:
            return []
        requests = Limit(requests_per_minute=limit.requests_per_minute)
        try:
            ticket = await self._take(
                client if client is not None else ANONYMOUS, requests, 0, client
            )
        except LimiterUnavailable:
            return []
        await self.settle(ticket, None, status=0)
        return ticket.headers

    @staticmethod
    def _model_buckets(model: str, bucket: str, limits: ModelLimits) -> list[tuple[str, Limit]]:
        # Key names have no ":" (access/keys.py): these never meet a key's own bucket.
        out = []
        per_key, total = resolve(limits.per_key), resolve(limits.total)
        if per_key is not None:
            out.append((f"model:{model}:key:{bucket}", per_key))
        if total is not None:
            out.append((f"model:{model}", total))
        return out

    async def _take(
        self, bucket: str, limit: Limit, tokens: int, client: str | None, model: str | None = None
    ) -> Ticket:
        health = self.health
        if health.down_since is not None and time.monotonic() < health.retry_at:
            return self._without_store(bucket, limit, tokens)
        try:
            verdict, lease = await self.store.acquire(bucket, limit, tokens)
        except TableFull as exc:
            # Only this key is refused: the keys already in the table are still limited.
            logger.error(
                "%s: key %r is refused; the redis store has no such bound",
                exc,
                bucket,
                extra={"event": "rate_limit_store", "store": self.store.kind, "state": "full"},
            )
            raise LimiterUnavailable(
                f"The rate limiter has no room for this API key ({exc}).",
                headers={"Retry-After": "60"},
            ) from exc
        except _STORE_ERRORS as exc:
            self._failed(exc)
            return self._without_store(bucket, limit, tokens)
        if health.down_since is not None:
            logger.warning(
                "the rate-limit store answers again",
                extra={"event": "rate_limit_store", "store": self.store.kind, "state": "ok"},
            )
            health.down_since = None
        if not verdict.allowed:
            raise refusal(limit, verdict, client=client, tokens=tokens, model=model)
        return Ticket(bucket, limit, tokens, lease, rate_headers(limit, verdict))

    def _failed(self, exc: BaseException) -> None:
        health = self.health
        health.errors += 1
        health.last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        now = time.monotonic()
        health.retry_at = now + self.config.redis.retry_interval
        if health.down_since is None:
            health.down_since = now
            logger.error(
                "the rate-limit store failed; %s until it answers",
                "letting requests through" if self.fail_open else "refusing requests",
                extra={
                    "event": "rate_limit_store",
                    "store": self.store.kind,
                    "state": "down",
                    "on_failure": self.config.redis.on_failure,
                    "error": health.last_error,
                },
            )

    @property
    def fail_open(self) -> bool:
        return self.config.redis.on_failure == "fail_open"

    def _without_store(self, bucket: str, limit: Limit, tokens: int) -> Ticket:
        self.health.bypassed += 1
        if not self.fail_open:
            raise LimiterUnavailable(
                "The rate limiter is unavailable; try again shortly.",
                headers={"Retry-After": "1"},
            )
        return Ticket(bucket, limit, tokens, "", [], counted=False)

    async def settle(self, ticket: Ticket, usage: Usage | None, *, status: int) -> None:
        """The request ended having used ``usage`` with HTTP ``status`` (usage None:
        unknown, the reservation stays charged unless the status is an error or no
        answer, 0); frees its concurrency slot."""
        for held in ticket.also:
            await self.settle(held, usage, status=status)
        if not ticket.counted:
            return
        if usage is not None:
            used = usage.total
        else:
            used = ticket.reserved if 200 <= status < 400 else 0
        try:
            await self.store.release(
                ticket.bucket, ticket.limit, reserved=ticket.reserved, used=used, lease=ticket.lease
            )
        except _STORE_ERRORS as exc:
            # The lease expires on its own (lease_seconds); the tokens stay reserved.
            self._failed(exc)

    async def probe(self) -> None:
        """Ask the store whether it answers (for /readyz; Redis only)."""
        ping = getattr(self.store, "ping", None)
        if ping is None:
            return
        try:
            await ping()
        except _STORE_ERRORS as exc:
            self._failed(exc)
        else:
            if self.down:
                logger.warning(
                    "the rate-limit store answers again",
                    extra={"event": "rate_limit_store", "store": self.store.kind, "state": "ok"},
                )
                self.health.down_since = None

    @property
    def down(self) -> bool:
        return self.health.down_since is not None

    def status(self) -> dict[str, Any]:
        """What /readyz shows."""
        health = self.health
        out: dict[str, Any] = {"store": self.store.kind, "state": "down" if self.down else "ok"}
        if self.store.kind == "redis":
            out["on_failure"] = self.config.redis.on_failure
            out["errors"] = health.errors
            if health.last_error is not None:
                # Its kind only: the text names the store's address (the log has it).
                out["last_error"] = health.last_error.partition(":")[0]
        return out

    async def aclose(self) -> None:
        await self.store.aclose()


def make_limiter(
    config: RateLimits, *, worker_dir: Path | None = None, worker_index: int = 0
) -> Limiter | None:
    """The limiter the config asks for (None when no limits are configured): Redis,
    shared memory for the workers of one ``serve --workers N``, or this process's."""
    if not config.enabled:
        return None
    store: Store
    if config.store == "redis":
        store = RedisStore(config.redis)
    elif worker_dir is not None:
        store = SharedStore(worker_dir, worker_index=worker_index)
    else:
        store = LocalStore()
    return Limiter(config, store)
