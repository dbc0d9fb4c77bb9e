"""The ``rate_limits:`` and ``metering:`` sections of config.yaml (pydantic models).

``rate_limits`` names the limits of each API key: ``default`` for every key,
``profiles`` for the keys that select a profile, ``keys`` by key name; a key's
limits are those three laid over one another, field by field (the key's own
win). Every key has its own counters. ``store`` says where the counters live:
``local`` (this machine: one process, or shared by the workers of one
``serve --workers N``) or ``redis`` (every gateway pod that uses that Redis).
Named ``rate_limits`` because ``limits`` holds the byte-size limits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_REDIS_URL = r"^rediss?://"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateLimit(_Section):
    """The limits of one key (each unset: no such limit)."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="prompt + completion tokens; a request reserves its worst case",
    )
    tokens_per_day: int | None = Field(default=None, ge=1)
    concurrent_requests: int | None = Field(
        default=None, ge=1, description="requests at once; a stream counts until it ends"
    )


class RedisStore(_Section):
    """Where ``store: redis`` keeps the counters, and what happens when it cannot."""

    url: str = Field(default="redis://127.0.0.1:6379/0", pattern=_REDIS_URL)
    timeout: float = Field(
        default=0.005, gt=0, description="seconds per decision; past it Redis counts as down"
    )
    on_failure: Literal["fail_open", "fail_closed"] = Field(
        default="fail_open",
        description="Redis down: fail_open lets requests through unlimited, fail_closed "
        "answers 503",
    )
    retry_interval: float = Field(
        default=1.0, gt=0, description="seconds after a failure before Redis is tried again"
    )
    key_prefix: str = Field(default="ftgw:rl:", description="prefix of every Redis key")
    lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a concurrency slot of a pod that died is freed after this long "
        "(live pods renew theirs)",
    )


class ModelLimits(_Section):
    """The limits of one model: of each key that uses it, and of all of them together."""

    per_key: RateLimit | None = Field(
        default=None, description="each API key's limits on this model (its own counters)"
    )
    total: RateLimit | None = Field(
        default=None, description="the model's limits, every key's requests counted together"
    )


class RateLimits(_Section):
    """Per-key limits: requests and tokens per minute, tokens per day, concurrency."""

    default: RateLimit | None = Field(default=None, description="limits of every key")
    profiles: dict[str, RateLimit] = Field(
        default_factory=dict, description="limits of the keys that select a policy profile"
    )
    keys: dict[str, RateLimit] = Field(default_factory=dict, description="limits by key name")
    models: dict[str, ModelLimits] = Field(
        default_factory=dict,
        description="limits by the model a request asks for (the name its engine serves), "
        "on top of the key's",
    )
    store: Literal["local", "redis"] = Field(
        default="local", description="local (this machine) or redis (shared by pods)"
    )
    redis: RedisStore = Field(default_factory=RedisStore)
    default_max_tokens: int = Field(
        default=4096,
        ge=1,
        description="the completion tokens reserved for a request without max_tokens",
    )

    @property
    def enabled(self) -> bool:
        return (
            self.default is not None or bool(self.profiles) or bool(self.keys) or bool(self.models)
        )


class Metering(_Section):
    """Token counts from the engine's ``usage``."""

    stream_usage: bool = Field(
        default=True,
        description="ask the engine for usage on streams (stream_options.include_usage); "
        "the extra chunk is removed when the client did not ask",
    )
