"""The app factory: routes, error handlers and the lifespan that owns the upstream client."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth import load_keyring
from gateway.dispatch import DispatchingApp
from gateway.drain import Drain
from gateway.errors import GatewayError, MethodNotAllowed, NotFound
from gateway.exchange import NullObserver, Observer, Observers
from gateway.logs import AccessLog
from gateway.metrics import Metrics
from gateway.metricsport import MetricsExposure
from gateway.policy import Policy
from gateway.policyfile import load_policy_file
from gateway.proxy import ProxyEndpoint
from gateway.reload import PolicyReloader
from gateway.settings import Settings
from gateway.upstream import Headers, UpstreamClient, make_upstream

logger = logging.getLogger("gateway")


@dataclass
class GatewayState:
    """What the endpoints share. ``policy`` is swapped whole on reload: a request
    reads it once, so it finishes under the policy it started with."""

    settings: Settings
    policy: Policy
    upstream_auth: bytes | None = None
    observer: Observer = field(default_factory=NullObserver)
    # Checks the client's credentials: returns (client name, policy profile) or
    # raises AuthenticationFailed. None: no keys configured.
    authenticate: Callable[[Headers], tuple[str | None, str | None]] | None = None
    upstream: UpstreamClient = field(init=False)
    drain: Drain = field(default_factory=Drain)


def load_policy(settings: Settings) -> Policy:
    """Load and compile the policy file the settings name (SourceError if invalid)."""
    source, digest = load_policy_file(settings.policy)
    return Policy(source, digest=digest, path=str(settings.policy))


def error_response(exc: GatewayError) -> Response:
    """The one place a GatewayError becomes an HTTP response outside the proxy path."""
    return JSONResponse(exc.openai_error(), status_code=exc.status, headers=exc.headers)


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)  # registered for GatewayError only
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    where = f"({request.method} {request.url.path})"
    if exc.status_code == 405:
        return error_response(MethodNotAllowed(f"Method not allowed {where}."))
    return error_response(NotFound(f"Invalid URL {where}."))


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    logger.exception("unexpected error", exc_info=exc)
    return error_response(GatewayError("The gateway failed to process the request."))


def create_app(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    policy: Policy | None = None,
    registry: CollectorRegistry | None = None,
    worker_dir: Path | None = None,
) -> Starlette:
    """Build the gateway. Tests inject ``transport``; production passes none.
    Metrics go to ``registry`` (a new one per app by default); ``worker_dir``:
    this app is one of several workers, which meet there to add up metrics."""
    key = settings.upstream_api_key()
    state = GatewayState(
        settings=settings,
        policy=policy if policy is not None else load_policy(settings),
        upstream_auth=f"Bearer {key}".encode() if key else None,
    )
    profiles_in_use: frozenset[str] = frozenset()
    if settings.auth.enabled:
        keyring = load_keyring(
            settings.auth.keys_file,
            settings.auth.keys_env,
            profiles=state.policy.source.profiles,
        )
        state.authenticate = keyring.authenticate
        profiles_in_use = keyring.profiles

    metrics = Metrics(registry)
    metrics.policy_live(state.policy)
    if settings.log.requests:
        state.observer = Observers(metrics, AccessLog(format=settings.log.format))
    else:
        state.observer = metrics
    reloader = PolicyReloader(state, metrics=metrics, profiles=profiles_in_use)
    exposure = MetricsExposure(settings, metrics, worker_dir=worker_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.upstream = make_upstream(settings, transport=transport)
        try:
            async with reloader.running(watch=settings.watch_policy), exposure.serving():
                yield
        finally:
            await state.upstream.aclose()

    async def healthz(request: Request) -> Response:
        # The pid says which worker process answered (serve --workers N).
        return JSONResponse({"status": "ok", "pid": os.getpid()})

    async def readyz(request: Request) -> Response:
        if state.drain.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        policy = state.policy
        body: dict[str, Any] = {
            "status": "ready",
            "policy": {
                "path": policy.path,
                "sha256": policy.digest,
                "loaded_at": policy.loaded_at.isoformat(),
            },
        }
        if reloader.last is not None:
            body["policy"]["last_reload"] = {
                "result": reloader.last.result,
                "trigger": reloader.last.trigger,
                "at": reloader.last.at.isoformat(),
                "error": reloader.last.error,
            }
        try:
            response = await state.upstream.request("GET", "/v1/models", headers=[], body=b"")
            await response.aclose()
            if response.status >= 500:
                raise RuntimeError(f"engine answered HTTP {response.status}")
        except (GatewayError, RuntimeError) as exc:
            body["status"] = "not ready"
            body["reason"] = f"upstream: {exc}"
            return JSONResponse(body, status_code=503)
        return JSONResponse(body)

    proxied = {
        ("POST", "/v1/chat/completions"): ProxyEndpoint(state, route="/v1/chat/completions"),
        ("POST", "/v1/completions"): ProxyEndpoint(state, route="/v1/completions"),
        ("GET", "/v1/models"): ProxyEndpoint(state, route=None),
    }
    routes = [Route(path, endpoint, methods=[m]) for (m, path), endpoint in proxied.items()]
    routes += [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
    if exposure.on_main_port:
        routes.append(Route("/metrics", exposure.endpoint, methods=["GET"]))
    app = DispatchingApp(
        direct=proxied,
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            GatewayError: _gateway_error,
            HTTPException: _http_error,
            Exception: _unexpected_error,
        },
    )
    app.state.gateway = state
    app.state.metrics = metrics
    app.state.reloader = reloader
    return app
