"""The line a gateway writes once as it starts: what is on, and where it points.

An operator reading the log (or a log search) sees at once whether tracing is
on and where spans go, which rate-limit and response stores are used, how many
API keys were loaded, and which policy (by digest) is live; a URL's password,
if any, is never written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gateway import __version__
from gateway.observe.interpreter import this_interpreter
from gateway.policy.engine import Policy
from gateway.settings import Settings, Tracing

_OTLP_DEFAULT = "http://localhost:4318/v1/traces"


def without_password(url: str) -> str:
    """``url`` with the password of its user part (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def tracing_endpoint(tracing: Tracing, environ: Mapping[str, str]) -> str:
    """Where the OTLP exporter sends spans: the key, else the SDK's variables, else its
    default (the order the OpenTelemetry SDK itself follows)."""
    if tracing.endpoint is not None:
        return tracing.endpoint
    signal = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if signal:
        return signal
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if base:
        return base.rstrip("/") + "/v1/traces"
    return _OTLP_DEFAULT


def startup_record(
    settings: Settings,
    policy: Policy,
    *,
    key_count: int | None,
    workers: int,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The fields of the start-up line."""
    environ = os.environ if environ is None else environ
    upstream = settings.upstream
    limits = settings.rate_limits
    if not limits.enabled:
        rate_limits = "off"
    elif limits.store == "redis":
        rate_limits = f"redis {without_password(limits.redis.url)}"
    else:
        rate_limits = "shared memory" if workers > 1 else "local"
    store = settings.store
    if upstream.responses == "native":
        responses = "native (the engine's)"
    elif store.backend == "sqlite":
        responses = f"sqlite {store.path}"
    elif store.backend == "redis":
        responses = f"redis {without_password(store.url)}"
    else:
        responses = store.backend
    tracing = settings.tracing
    return {
        "version": __version__,
        "workers": workers,
        "upstream": (
            f"dns {upstream.dns.name}"
            if upstream.dns is not None
            else [without_password(u) for u in upstream.replicas]
        ),
        "policy": policy.path,
        "policy_sha256": policy.digest,
        "api_keys": key_count if key_count is not None else "off",
        "rate_limits": rate_limits,
        "response_store": responses,
        "tracing": tracing_endpoint(tracing, environ) if tracing.enabled else "off",
        "log_level": settings.log.level,
        "python": this_interpreter()[0],
    }
