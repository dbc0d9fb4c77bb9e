"""The app factory: routes, error handlers and the lifespan that owns the upstream client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway._types import Endpoint
from gateway.app.dispatch import DispatchingApp
from gateway.app.health import Health
from gateway.app.mount import make_route
from gateway.app.reload import Reloader
from gateway.app.reloadable import Reloadable, load_reloadable
from gateway.batches.mount import BatchService
from gateway.errors import OPENAI_ERRORS, GatewayError, MethodNotAllowed, NotFound, render
from gateway.errorshapes import path_error_shape
from gateway.fleet.access import make_gate
from gateway.fleet.engines import engine_dns, hinter_for, open_engines
from gateway.fleet.models import ModelList
from gateway.fleet.reload import fleet_changed
from gateway.fleet.router import ModelRouter, needs_router
from gateway.fleet.served import ServedNames
from gateway.limits.limiter import make_limiter
from gateway.messages.errors import ANTHROPIC_ERRORS, unserved
from gateway.messages.models import AnthropicModels, ByVersion
from gateway.observe.capture import BodyCapture
from gateway.observe.exchange import UNSERVED, Exchange
from gateway.observe.metrics import Metrics
from gateway.observe.metricsport import MetricsExposure
from gateway.observe.modelnames import configured_models
from gateway.observe.observers import make_observers
from gateway.policy.engine import Policy
from gateway.proxy.endpoint import ProxyEndpoint
from gateway.proxy.headers import request_id_of
from gateway.proxy.openai import ModelsRoute
from gateway.responses.routes import stored_routes
from gateway.responses.store import make_store
from gateway.routes import ROUTES
from gateway.settings import Settings
from gateway.state import GatewayState
from gateway.upstream.balancer import Balancer
from gateway.upstream.discovery import discovering

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger("gateway")


def error_response(exc: GatewayError) -> Response:
    """A GatewayError as a Starlette response (the routes outside the proxy path)."""
    return Response(
        render(exc), status_code=exc.status, headers=exc.headers, media_type="application/json"
    )


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)  # registered for GatewayError only
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    path = request.url.path
    where = f"({request.method} {path})"
    error: GatewayError = NotFound(f"Invalid URL {where}.")
    if exc.status_code == 405:
        error = MethodNotAllowed(f"Method not allowed {where}.")
    # A path under a route of another API's (Anthropic's /v1/messages/batches) is
    # answered in that API's shape, for its clients (messages/errors.py names it).
    shape = path_error_shape(path)
    if shape is ANTHROPIC_ERRORS and exc.status_code != 405:
        error = unserved(request.method, path)
    # Logged and counted like any answer: an operator sees clients calling a route
    # the gateway lacks.
    request_id = request_id_of(request.scope["headers"]).decode()
    exchange = Exchange(request.method, path, UNSERVED, request_id, policed=False)
    observer = request.app.state.gateway.observer
    observer.started(exchange)
    if shape is OPENAI_ERRORS:
        response = error_response(error)
    else:
        response = Response(
            shape.body(error, request_id),
            status_code=shape.status(error),
            headers={**error.headers, "request-id": request_id},
            media_type="application/json",
        )
    response.headers["x-request-id"] = exchange.request_id
    exchange.status = response.status_code
    exchange.error_code = error.code
    exchange.bytes_out = len(response.body)
    observer.finished(exchange)
    return response


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
    worker_index: int = 0,
    metrics_socket: socket.socket | None = None,
    span_exporter: SpanExporter | None = None,
) -> Starlette:
    """Build the gateway. Tests inject ``transport``; production passes none.
    Metrics go to ``registry`` (a new one per app by default); ``worker_dir``:
    this app is one of several workers, which meet there to add up metrics;
    ``worker_index``: its number among them (rate limits shared in memory);
    ``metrics_socket``: the metrics port, bound by the workers' parent;
    ``span_exporter``: where spans go instead of OTLP (the bench's no-op one)."""
    # The same function builds what a reload and ``check`` build: they agree.
    live = load_reloadable(settings, policy=policy)
    state = GatewayState(settings=settings, policy=live.policy)
    if settings.capture.enabled:
        state.capture = BodyCapture(settings.capture)
    if not settings.deployments:  # a fleet's hints are each deployment's (fleet/router.py)
        state.hinter = hinter_for(settings.upstream)
    if live.keyring is not None:
        state.authenticate = live.keyring.authenticate
    state.models = make_gate(settings.model_access)
    if not settings.deployments:  # a fleet's table refuses the names it does not serve
        state.served = ServedNames(state, settings.upstream.models)
    state.router = ModelRouter(state) if needs_router(state) else None

    state.limiter = make_limiter(
        settings.rate_limits, worker_dir=worker_dir, worker_index=worker_index
    )
    metrics = Metrics(registry)
    metrics.limiter = state.limiter
    metrics.policy_live(state.policy)
    metrics.name_models(configured_models(settings, [live.policy, *live.policies.values()]))
    state.observer, state.tracer = make_observers(settings, metrics, span_exporter=span_exporter)
    reloader = Reloader(state, metrics=metrics, keyring=live.keyring)
    exposure = MetricsExposure(settings, metrics, worker_dir=worker_dir, sock=metrics_socket)
    health = Health(state, reloader)
    store = make_store(settings.store) if settings.upstream.responses == "translate" else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.engines = engines = open_engines(settings, live.policies, transport=transport)

        # A reload's new table keeps the pools of the deployments it leaves unchanged.
        def refleet(new: Reloadable) -> bool:
            if not fleet_changed(state.engines, new.settings, new.policies):
                return False
            state.engines = open_engines(
                new.settings, new.policies, transport=transport, reuse=state.engines
            )
            return True

        reloader.refleet = refleet
        # The routing metrics are one balancer's; a fleet's are by deployment.
        for pool in engines.pools() if not engines.fleet else ():
            if isinstance(pool, Balancer):
                metrics.tallies.routing = pool.tallies
                metrics.routing_gauges = pool.gauges
        if engines.fleet:
            # By deployment instead, from the live table (a reload may swap it).
            metrics.deployment_pools = lambda: [
                (e.name, e.upstream)
                for e in state.engines.engines
                if isinstance(e.upstream, Balancer)
            ]
        try:
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(reloader.running(watch=settings.watch_policy))
                await stack.enter_async_context(exposure.serving())
                for engine in engines.engines:
                    dns = (
                        settings.upstream.dns if not engines.fleet else engine_dns(settings, engine)
                    )
                    await stack.enter_async_context(discovering(engine.upstream, dns))
                if batches is not None:
                    await stack.enter_async_context(batches.serving())
                yield
        finally:
            try:
                await state.engines.aclose()  # the live table: a reload may have swapped it
                if store is not None:
                    await store.aclose()
                if state.limiter is not None:
                    await state.limiter.aclose()
            finally:
                if state.tracer is not None:
                    # Flushing blocks (an export to a collector that may be gone): off the loop.
                    bound = settings.tracing.export_timeout + 1
                    await asyncio.to_thread(state.tracer.shutdown, bound)

    proxied: dict[tuple[str, str], Endpoint] = {
        ("POST", path): ProxyEndpoint(state, make_route(state, path, store=store))
        for path in ROUTES
    }
    # The Batch API: its lines go through these routes' own objects (batches/inprocess.py).
    batches = BatchService.make(state, proxied, keys=lambda: reloader.keys)
    if batches is not None:
        metrics.batch_gauges = batches.runner.gauges
    if settings.deployments or settings.upstream.models is not None:
        # A fleet answers its model list itself, from its table (fleet/models.py), and
        # so does one deployment whose names are configured.
        models = ModelList(state)
        fleet_routes = [
            Route("/v1/models", models.list, methods=["GET"]),
            Route("/v1/models/{model:path}", models.one, methods=["GET"]),
        ]
    else:
        # Anthropic's clients send anthropic-version: the engine's list in their shape.
        proxied["GET", "/v1/models"] = ByVersion(
            ProxyEndpoint(state, AnthropicModels(state)), ProxyEndpoint(state, ModelsRoute(state))
        )
        fleet_routes = []
    routes = [Route(path, endpoint, methods=[m]) for (m, path), endpoint in proxied.items()]
    routes += [
        *fleet_routes,
        *stored_routes(state, store),
        *(batches.routes() if batches is not None else ()),
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
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
    app.state.key_count = len(live.keyring.keys) if live.keyring is not None else None
    app.state.metrics = metrics
    app.state.reloader = reloader
    app.state.batches = batches
    return app
