"""The engine behind the gateway, or behind one deployment of a fleet: its replicas,
its client, how a replica is picked and how many requests each may hold.

The ``upstream`` section of config.yaml, and each deployment's (gateway/fleet/).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.routing.config import Affinity, Dns, Queue

URL_PATTERN = r"^https?://[^/]+"


def _url_list(value: Any) -> Any:
    if isinstance(value, str):
        return [u.strip() for u in value.split(",") if u.strip()]
    return value


class Upstream(BaseModel):
    """The engine behind the gateway: one (``url``) or several replicas (``urls``)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(default="http://127.0.0.1:8000", pattern=URL_PATTERN)
    urls: list[Annotated[str, Field(pattern=URL_PATTERN)]] = Field(
        default_factory=list,
        min_length=1,
        description="several engine replicas (instead of url); a string is split at commas",
    )
    eject_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a replica that refuses connections stays out this long, then must "
        "pass a health check",
    )
    health_path: str = Field(default="/v1/models", pattern=r"^/")
    api_key_env: str | None = Field(
        default=None,
        description="name of the environment variable that holds the engine's API key "
        "(never the key itself)",
    )
    client: Literal["httpx", "aiohttp", "httptools"] = Field(
        default="httptools",
        description="upstream HTTP client: httpx, aiohttp, or httptools (the fastest; "
        "plain HTTP/1.1 only)",
    )
    max_connections: int = Field(default=1000, ge=1, description="per replica")
    responses: Literal["translate", "native"] = Field(
        default="translate",
        description="/v1/responses: translate to chat completions, or forward to the "
        "engine's own /v1/responses (native)",
    )
    # Engine-aware routing (docs/routing.md).
    routing: Literal["least_in_flight", "affinity"] = Field(
        default="least_in_flight",
        description="least_in_flight, or affinity: a key's requests stay on one replica "
        "while its load is within affinity.load_factor",
    )
    affinity: Affinity = Field(default_factory=Affinity)
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        description="requests in flight per replica (per gateway process) at most; past it "
        "they wait in the queue. None: no limit",
    )
    queue: Queue = Field(default_factory=Queue)
    dns: Dns | None = Field(default=None, description="replicas from a DNS name (instead of urls)")

    @model_validator(mode="before")
    @classmethod
    def _several(cls, data: Any) -> Any:
        # FT_GATEWAY_UPSTREAM and --upstream set url; commas there mean several.
        if isinstance(data, dict):
            if data.get("dns") is not None and "urls" in data:
                raise ValueError("give 'urls' or 'dns' (replicas from a DNS name), not both")
            url = data.get("url")
            if isinstance(url, str) and "," in url:
                if "urls" in data:
                    raise ValueError("give 'url' (one engine) or 'urls' (several), not both")
                data = {k: v for k, v in data.items() if k != "url"}
                data["urls"] = url
            if "urls" in data:
                if "url" in data:
                    raise ValueError("give 'url' (one engine) or 'urls' (several), not both")
                data = {**data, "urls": _url_list(data["urls"])}
                if isinstance(data["urls"], list) and data["urls"]:
                    data["url"] = data["urls"][0]
        return data

    @property
    def replicas(self) -> list[str]:
        """Every engine base URL: ``urls``, or ``url`` alone."""
        return list(self.urls) if self.urls else [self.url]
