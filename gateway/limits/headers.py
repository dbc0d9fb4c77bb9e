"""OpenAI's rate-limit headers and 429 answers, from a Verdict.

OpenAI sends on every answer ``x-ratelimit-limit-requests``,
``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-requests`` (the time
until the limit is back to its full value, as a Go duration such as ``1s``,
``6m0s`` or ``20ms``) and the same three for tokens. The gateway sends those
of the key's per-minute limits (none for a limit the key does not have).
A 429 also carries ``Retry-After`` (whole seconds) and ``retry-after-ms``,
which openai-python and openai-node read first to time their retries.
"""

from __future__ import annotations

import math

from gateway._types import Headers
from gateway.errors import RateLimited
from gateway.limits.gcra import CONCURRENT, REQUESTS, TOKENS, Limit, Verdict

_UNITS = {
    REQUESTS: "requests per minute",
    TOKENS: "tokens per minute",
    "tokens_per_day": "tokens per day",
    CONCURRENT: "concurrent requests",
}


def duration(seconds: float) -> str:
    """``seconds`` as OpenAI writes a reset time: Go's duration format (``6m0s``)."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


def rate_headers(limit: Limit, verdict: Verdict) -> Headers:
    """The x-ratelimit-* headers of an answer to a key with ``limit``."""
    out: Headers = []
    if limit.requests_per_minute is not None and verdict.requests_remaining is not None:
        out += [
            (b"x-ratelimit-limit-requests", str(limit.requests_per_minute).encode()),
            (b"x-ratelimit-remaining-requests", str(verdict.requests_remaining).encode()),
            (b"x-ratelimit-reset-requests", duration(verdict.requests_reset).encode()),
        ]
    if limit.tokens_per_minute is not None and verdict.tokens_remaining is not None:
        out += [
            (b"x-ratelimit-limit-tokens", str(limit.tokens_per_minute).encode()),
            (b"x-ratelimit-remaining-tokens", str(verdict.tokens_remaining).encode()),
            (b"x-ratelimit-reset-tokens", duration(verdict.tokens_reset).encode()),
        ]
    return out


def refusal(
    limit: Limit, verdict: Verdict, *, client: str | None, tokens: int, model: str | None = None
) -> RateLimited:
    """The 429 for a refused request: a message naming the limit (and the model, for a
    model's limits), and the headers."""
    name = verdict.refused or REQUESTS
    value = getattr(limit, name)
    who = f" for key '{client}'" if client else ""
    if model is not None:
        who += f" on model '{model}'"
    headers = {k.decode(): v.decode() for k, v in rate_headers(limit, verdict)}
    kind = "requests" if name in (REQUESTS, CONCURRENT) else "tokens"
    if verdict.too_large:
        message = (
            f"Request too large{who} on {_UNITS[name]}: limit {value}, requested {tokens} "
            "(the prompt estimate plus max_tokens). Lower max_tokens or the prompt."
        )
        return RateLimited(message, kind=kind, limit=name, headers=headers)
    wait = verdict.retry_after
    if name == CONCURRENT:
        detail = f"limit {value}, in flight {verdict.in_flight}"
    elif name == REQUESTS:
        detail = f"limit {value}, requested 1"
    else:
        detail = f"limit {value}, requested {tokens}"
    message = (
        f"Rate limit reached{who} on {_UNITS[name]}: {detail}. "
        f"Please try again in {duration(wait)}."
    )
    headers["retry-after"] = str(max(1, math.ceil(wait)))
    headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
    return RateLimited(message, kind=kind, limit=name, headers=headers)
