"""``ft-gateway extproc`` running: the ext_proc service and the gRPC health protocol on
one gRPC port, /metrics on its own, the reloader, until SIGTERM or SIGINT.

Start-up builds what ``serve``'s app factory builds, from the same functions: the
policy, keys and fleet (``load_reloadable``), the observers (``make_observers``), the
reloader (SIGHUP, ``--watch``; all or nothing, its result in the log, the metrics and
the health service ``ft-gateway.reload``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ext_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway.app.reload import FAILED, Reloader, ReloadResult
from gateway.app.reloadable import load_reloadable
from gateway.extproc.decision import Decider
from gateway.extproc.fleet import Fleet
from gateway.extproc.stream import ExternalProcessor
from gateway.fleet.access import make_gate
from gateway.observe.capture import BodyCapture
from gateway.observe.metrics import Metrics
from gateway.observe.metricsport import MetricsExposure
from gateway.observe.modelnames import configured_models
from gateway.observe.observers import make_observers
from gateway.settings import Settings
from gateway.state import GatewayState

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger("gateway")
SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
# SERVING while the last reload (or the start) succeeded, NOT_SERVING after one failed
# (the processor still serves, under the policy it had: "" and SERVICE stay SERVING).
RELOAD_SERVICE = "ft-gateway.reload"
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A message holds the whole buffered body: gRPC's 4 MiB default would refuse a body
# that limits.max_body_bytes allows.
_MESSAGE_SLACK = 1 << 20


def refusals(settings: Settings) -> list[str]:
    """What the config asks of the processor that it cannot do (it does not start)."""
    problems = []
    if settings.rate_limits.enabled:
        problems.append(
            "rate_limits: a key's limits are settled by each answer's usage, which an "
            "external processor does not see; run them in ft-gateway serve, or in "
            "Envoy's own rate limit service (docs/envoy.md)"
        )
    return problems


def _bind_metrics(settings: Settings) -> tuple[socket.socket, int]:
    """The metrics port's socket: ``listen.metrics_port``, else ``listen.port`` (the
    processor serves no HTTP API of its own)."""
    listen = settings.listen
    port = listen.metrics_port if listen.metrics_port is not None else listen.port
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((listen.host, port))
    bound: int = sock.getsockname()[1]
    return sock, bound


@dataclass(frozen=True)
class Processing:
    """What one processor runs on: the live state, the decider, the reloader, the metrics."""

    state: GatewayState
    decider: Decider
    reloader: Reloader
    metrics: Metrics


def build(settings: Settings, *, span_exporter: SpanExporter | None = None) -> Processing:
    """Everything the processor decides by, from ``settings`` (SourceError if a file is
    invalid): what serve's app factory builds, by the same functions (``span_exporter``:
    where spans go instead of OTLP)."""
    live = load_reloadable(settings)
    state = GatewayState(settings=settings, policy=live.policy)
    if live.keyring is not None:
        state.authenticate = live.keyring.authenticate
    state.models = make_gate(settings.model_access)
    if settings.capture.enabled:
        state.capture = BodyCapture(settings.capture)
    metrics = Metrics()
    metrics.policy_live(state.policy)
    metrics.name_models(configured_models(settings, [live.policy, *live.policies.values()]))
    state.observer, state.tracer = make_observers(settings, metrics, span_exporter=span_exporter)
    decider = Decider(state, Fleet(settings, live.policies))
    reloader = Reloader(state, metrics=metrics, keyring=live.keyring)
    reloader.refleet = decider.refleet
    return Processing(state, decider, reloader, metrics)


async def serve_extproc(built: Processing, *, stop: asyncio.Event | None = None) -> None:
    """Serve ``built`` until SIGTERM or SIGINT (or ``stop`` is set: a run inside another
    program's loop); the line ``extproc_listening`` logged (with both ports) once both
    accept."""
    settings = built.state.settings
    state, decider, reloader, metrics = built.state, built.decider, built.reloader, built.metrics

    limit = settings.limits.max_body_bytes + _MESSAGE_SLACK
    server = grpc.aio.server(
        # No port shared with another process: a second processor on the same port
        # fails to start instead of taking half of Envoy's streams.
        options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)]
    )
    ext_grpc.add_ExternalProcessorServicer_to_server(ExternalProcessor(decider), server)
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    extproc = settings.extproc
    grpc_port = server.add_insecure_port(f"{extproc.host}:{extproc.port}")
    if grpc_port == 0:
        raise OSError(f"cannot listen on {extproc.host}:{extproc.port}")

    async def reloaded(result: ReloadResult) -> None:
        await checks.set(RELOAD_SERVICE, _NOT_SERVING if result.result == FAILED else _SERVING)

    reloader.on_result = reloaded
    sock, metrics_port = _bind_metrics(settings)
    listen = settings.listen.model_copy(update={"metrics_port": metrics_port})
    exposure = MetricsExposure(settings.model_copy(update={"listen": listen}), metrics, sock=sock)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(reloader.running(watch=settings.watch_policy))
            await stack.enter_async_context(exposure.serving())
            await server.start()
            for service in ("", SERVICE, RELOAD_SERVICE):
                await checks.set(service, _SERVING)
            logger.info(
                "ft-gateway extproc listening",
                extra={
                    "event": "extproc_listening",
                    "grpc": f"{extproc.host}:{grpc_port}",
                    "grpc_port": grpc_port,
                    "metrics_port": metrics_port,
                },
            )
            await stop.wait()
            # Out of Envoy's and the kubelet's rotation first, then the streams in flight
            # finish (each is one request's messages: quick), then the rest is cut.
            await checks.enter_graceful_shutdown()
            await server.stop(extproc.drain_timeout)
    finally:
        await server.stop(0)  # (at once if it stopped above; else what was started goes)
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.remove_signal_handler(signum)
        if state.tracer is not None:
            bound = settings.tracing.export_timeout + 1
            await asyncio.to_thread(state.tracer.shutdown, bound)
