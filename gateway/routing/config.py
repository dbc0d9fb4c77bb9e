"""The ``upstream`` keys of engine-aware routing: the policy, the affinity key, the
per-replica limit and its queue, and replicas found by DNS (see docs/routing.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KeySource = Literal["prompt_cache_key", "header", "api_key", "content"]
_DEFAULT_KEYS: tuple[KeySource, ...] = ("prompt_cache_key", "header", "content")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Affinity(_Section):
    """How ``routing: affinity`` finds a request's key, and how far a replica may be loaded."""

    keys: list[KeySource] = Field(
        default_factory=lambda: list(_DEFAULT_KEYS),
        min_length=1,
        description="where the affinity key comes from, the first present one wins: "
        "prompt_cache_key, header, api_key (the key's name), content (the leading messages)",
    )
    header: str = Field(
        default="x-session-id",
        pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
        description="the session header read by the 'header' source",
    )
    load_factor: float = Field(
        default=1.25,
        ge=1.0,
        description="a replica takes a key while its requests in flight stay under "
        "load_factor x the mean (consistent hashing with bounded loads)",
    )
    leading_messages: int = Field(
        default=1,
        ge=1,
        description="the 'content' source hashes the leading system/developer messages "
        "and this many messages after them, whole",
    )
    prompt_chars: int = Field(
        default=2048,
        ge=1,
        description="the 'content' source of /v1/completions hashes this many leading "
        "characters of the prompt",
    )


class Queue(_Section):
    """The gateway's queue in front of replicas that are at ``max_in_flight``."""

    size: int = Field(default=1024, ge=0, description="requests waiting at most; more get 503")
    timeout: float = Field(
        default=30.0, gt=0, description="seconds a request may wait; then 503 with Retry-After"
    )
    low_priority_profiles: list[str] = Field(
        default_factory=lambda: ["batch"],
        description="keys with these policy profiles wait behind all others",
    )


class Dns(_Section):
    """Replicas from a DNS name (a Kubernetes headless Service), resolved on an interval."""

    name: str = Field(min_length=1, description="the DNS name whose addresses are the replicas")
    port: int = Field(default=8000, ge=1, le=65535)
    scheme: Literal["http", "https"] = "http"
    interval: float = Field(default=5.0, gt=0, description="seconds between resolutions")
    nameserver: str | None = Field(
        default=None,
        pattern=r"^[^\s:]+(:\d+)?$|^\[[0-9a-fA-F:.]+\](:\d+)?$",
        description="ask this DNS server (HOST or HOST:PORT) instead of the system "
        "resolver (needs dnspython)",
    )
