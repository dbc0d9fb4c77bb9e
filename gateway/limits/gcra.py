"""The limit decision, pure: GCRA for rates, a count for concurrency.

GCRA (the generic cell rate algorithm, ATM Forum TM 4.0; a token bucket
written as one number) keeps, per limit, the *theoretical arrival time* TAT:
the moment the bucket would be full again. A limit of C per period P has an
emission interval T = P / C. A request costing c (1 for requests, its reserved
tokens for tokens) is admitted when ``max(TAT, now) + c*T - now <= P``, and
then TAT becomes that sum. So a key may use C at once and then C per P,
spread evenly (C/P per second refilled): never more than C in any window of
length P plus what refilled in it. Remaining = ``(P - (TAT - now)) / T``,
reset = ``TAT - now``.

Tokens settle when the request ends: TAT moves by ``(used - reserved) * T``
(back for what was not used, never before now; on for what a wrong estimate
under-reserved). A request is all-or-nothing over its limits: if one refuses,
none is charged.

The state of one key is four numbers: TAT of requests/min, tokens/min and
tokens/day, and requests in flight. shared.py keeps it in shared memory, and
redisstore.py's Lua script is this module written again for Redis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gateway.limits.config import RateLimit

MINUTE = 60.0
DAY = 86400.0
_SLACK = 1e-9  # float rounding: C admissions at once land on P, not past it

# Names of the limits, as the 429 message and metrics say them.
REQUESTS = "requests_per_minute"
TOKENS = "tokens_per_minute"
DAILY = "tokens_per_day"
CONCURRENT = "concurrent_requests"
LIMIT_NAMES = (REQUESTS, TOKENS, DAILY, CONCURRENT)


@dataclass(frozen=True, slots=True)
class Limit:
    """The limits of one key, resolved (None: no such limit)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    tokens_per_day: int | None = None
    concurrent_requests: int | None = None


def resolve(*layers: RateLimit | None) -> Limit | None:
    """The layers laid over one another in order (later wins, field by field)."""
    values: dict[str, int] = {}
    for layer in layers:
        if layer is not None:
            values.update(layer.model_dump(exclude_none=True))
    return Limit(**values) if values else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer for one request: admitted or the limit that refused it, and the
    figures of the rate-limit headers (None where the key has no such limit)."""

    allowed: bool
    refused: str | None = None
    retry_after: float = 0.0  # seconds until the request would be admitted
    too_large: bool = False  # the request alone is over the limit: it never fits
    requests_remaining: int | None = None
    requests_reset: float = 0.0
    tokens_remaining: int | None = None
    tokens_reset: float = 0.0
    in_flight: int = 0


def _rate(tat: float, now: float, cost: int, capacity: int, period: float) -> tuple[float, float]:
    """(the new TAT, seconds to wait: 0 if admitted now, inf if never)."""
    if cost > capacity:
        return tat, math.inf
    interval = period / capacity
    new = max(tat, now) + cost * interval
    over = new - now - period
    return new, (over if over > _SLACK * period else 0.0)


def _remaining(tat: float, now: float, capacity: int, period: float) -> int:
    left = (period - max(tat - now, 0.0)) / (period / capacity)
    return max(0, int(math.floor(left + _SLACK * capacity)))


def acquire(state: list[float], limit: Limit, now: float, tokens: int) -> Verdict:
    """Admit one request reserving ``tokens`` against ``state`` (changed only if admitted)."""
    new_r, new_t, new_d = state[0], state[1], state[2]
    refused: str | None = None
    wait = 0.0
    checks = (
        (REQUESTS, 0, limit.requests_per_minute, 1, MINUTE),
        (TOKENS, 1, limit.tokens_per_minute, tokens, MINUTE),
        (DAILY, 2, limit.tokens_per_day, tokens, DAY),
    )
    news = [new_r, new_t, new_d]
    for name, index, capacity, cost, period in checks:
        if capacity is None:
            continue
        new, delay = _rate(state[index], now, cost, capacity, period)
        news[index] = new
        if delay > wait or (delay and refused is None):
            refused, wait = name, delay
    cap = limit.concurrent_requests
    if refused is None and cap is not None and state[3] >= cap:
        refused, wait = CONCURRENT, 1.0
    if refused is None:
        state[0], state[1], state[2] = news
        state[3] += 1
    r, t = (state[0], state[1]) if refused is not None else (news[0], news[1])
    return Verdict(
        allowed=refused is None,
        refused=refused,
        retry_after=wait,
        too_large=math.isinf(wait),
        requests_remaining=_maybe(limit.requests_per_minute, r, now),
        requests_reset=max(r - now, 0.0),
        tokens_remaining=_maybe(limit.tokens_per_minute, t, now),
        tokens_reset=max(t - now, 0.0),
        in_flight=int(state[3]),
    )


def _maybe(capacity: int | None, tat: float, now: float) -> int | None:
    return None if capacity is None else _remaining(tat, now, capacity, MINUTE)


def release(state: list[float], limit: Limit, now: float, *, reserved: int, used: int) -> None:
    """A request admitted by ``acquire`` ended having used ``used`` tokens."""
    diff = used - reserved
    for index, capacity, period in (
        (1, limit.tokens_per_minute, MINUTE),
        (2, limit.tokens_per_day, DAY),
    ):
        if capacity is not None and diff:
            state[index] = max(state[index] + diff * period / capacity, now)
    state[3] = max(state[3] - 1, 0)
