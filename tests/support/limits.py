"""What the rate-limit tests share: API keys with their hashes in a keys file, the
settings (or a config file) that limit them, the gateway with them in front of a metered
engine, and the rate-limit headers of an answer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.access.keys import hash_key
from gateway.settings import Settings
from tests.support.bodies import CHAT, chat
from tests.support.gateways import gateway_settings, serve_gateway
from tests.support.meteredengine import MeteredEngine
from tests.support.paths import POLICY, policy_with
from tests.support.servers import running_server

RATE_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)


def key_of(name: str) -> str:
    """The API key of the test key named ``name``."""
    return f"sk-{name}-secret"


def write_keys(directory: Path, keys: Mapping[str, str | None]) -> Path:
    """A keys file for ``keys`` (name -> profile or None); the keys are ``key_of(name)``."""
    path = directory / "keys.yaml"
    entries: list[dict[str, Any]] = []
    for name, profile in keys.items():
        entry: dict[str, Any] = {"name": name, "sha256": hash_key(key_of(name))}
        if profile is not None:
            entry["profile"] = profile
        entries.append(entry)
    path.write_text(yaml.safe_dump({"keys": entries}))
    return path


def policy_with_profiles(directory: Path, *names: str) -> Path:
    """The default policy with empty profiles ``names`` (for keys that select them)."""
    profiles = "".join(f"  {name}: {{}}\n" for name in names)
    return policy_with(directory, "\nprofiles:\n" + profiles)


def limited_settings(
    upstream: str,
    directory: Path,
    rate_limits: dict[str, Any],
    *,
    keys: Mapping[str, str | None] | None = None,
    policy: str | Path = POLICY,
) -> Settings:
    """Settings with API keys (``keys``, default one key ``alice``) and ``rate_limits``."""
    keys = keys if keys is not None else {"alice": None}
    keys_file = write_keys(directory, keys)
    profiles = sorted({p for p in keys.values() if p is not None})
    if profiles and policy == POLICY:
        policy = policy_with_profiles(directory, *profiles)
    return gateway_settings(
        upstream,
        policy=policy,
        overrides={("auth", "keys_file"): str(keys_file), ("rate_limits",): rate_limits},
    )


def write_config(
    directory: Path,
    upstream: str,
    rate_limits: dict[str, Any],
    *,
    keys: Mapping[str, str | None] | None = None,
    name: str = "config.yaml",
) -> Path:
    """A config file for ``ft-gateway serve``: the engine, API keys, ``rate_limits``."""
    keys_file = write_keys(directory, keys if keys is not None else {"alice": None})
    config = {
        "upstream": {"url": upstream},
        "policy": str(POLICY),
        "auth": {"keys_file": str(keys_file)},
        "rate_limits": rate_limits,
        "log": {"requests": False},
    }
    path = directory / name
    path.write_text(yaml.safe_dump(config))
    return path


def rate_headers(response: httpx.Response) -> dict[str, str]:
    """The x-ratelimit-* headers of ``response``."""
    return {k: response.headers[k] for k in RATE_HEADERS if k in response.headers}


def auth(name: str) -> dict[str, str]:
    """The Authorization header of the test key ``name``."""
    return {"Authorization": f"Bearer {key_of(name)}"}


@contextlib.asynccontextmanager
async def limited_gateway(
    tmp_path: Path,
    rate_limits: dict[str, Any],
    engine: MeteredEngine | None = None,
    *,
    keys: Mapping[str, str | None] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway with ``limited_settings`` in front of ``engine`` (a new MeteredEngine
    by default) under uvicorn; yields a client of it."""
    async with running_server(engine or MeteredEngine()) as engine_url:
        settings = limited_settings(engine_url, tmp_path, rate_limits, keys=keys)
        async with (
            serve_gateway(settings) as gw,
            httpx.AsyncClient(base_url=gw.url, timeout=30) as client,
        ):
            yield client


async def stream_of(client: httpx.AsyncClient, *, max_tokens: int) -> httpx.Response:
    """Key alice's streamed chat request, read to its end."""
    body = chat(stream=True, max_tokens=max_tokens)
    async with client.stream("POST", CHAT, json=body, headers=auth("alice")) as response:
        await response.aread()
        return response
