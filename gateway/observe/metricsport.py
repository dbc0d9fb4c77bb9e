"""Where ``/metrics`` is served: on the main port, or on ``listen.metrics_port``.

On its own port the scrape never queues behind client traffic, and the port can
stay inside the cluster while the main one faces clients. That port is served
by a second small server in the same process (and event loop) as the gateway;
with ``--workers`` the parent binds it once and every worker accepts on that
socket; whichever one is asked answers for all of them (workermetrics.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.observe.metrics import CONTENT_TYPE, Metrics
from gateway.observe.workermetrics import WorkerMetrics
from gateway.settings import Settings

# Set in the metrics server's task only: uvicorn's lines about its own start and
# stop ("Started server process [pid]", ...) are the main server's to write, once.
_IN_METRICS_SERVER: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "metrics_port_server", default=False
)


class _MainServerLinesOnly(logging.Filter):
    """Drops uvicorn's records written from the metrics server's task."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _IN_METRICS_SERVER.get()


_FILTER = _MainServerLinesOnly()


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the signals, and the lines about starting and
    stopping, to the gateway's own server."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]  # a generator context manager
        yield


class MetricsExposure:
    """Renders /metrics (this process's, or every worker's) and serves its own port."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        worker_dir: Path | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.metrics = metrics
        self.host = settings.listen.host
        self.port = settings.listen.metrics_port
        self.workers = WorkerMetrics(metrics, worker_dir) if worker_dir is not None else None
        # The metrics port's socket, bound by the workers' parent (None: bind it here).
        self.sock = sock

    @property
    def on_main_port(self) -> bool:
        return self.port is None

    async def render(self) -> bytes:
        """The Prometheus text exposition."""
        if self.workers is not None:
            return await self.workers.render()
        return self.metrics.render()

    async def endpoint(self, request: Request) -> Response:
        return Response(await self.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Answer other workers and serve the metrics port (if any) until exit."""
        async with contextlib.AsyncExitStack() as stack:
            if self.workers is not None:
                await stack.enter_async_context(self.workers.serving())
            if self.port is not None:
                await stack.enter_async_context(self._port(self.port))
            yield

    @contextlib.asynccontextmanager
    async def _port(self, port: int) -> AsyncIterator[None]:
        sock = self.sock
        if sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, port))
        app = Starlette(routes=[Route("/metrics", self.endpoint, methods=["GET"])])
        config = uvicorn.Config(
            app, lifespan="off", log_config=None, access_log=False, server_header=False
        )
        server = _QuietServer(config)
        uvicorn_logger = logging.getLogger("uvicorn.error")
        if _FILTER not in uvicorn_logger.filters:
            uvicorn_logger.addFilter(_FILTER)
        token = _IN_METRICS_SERVER.set(True)
        try:
            task = asyncio.create_task(server.serve(sockets=[sock]))  # copies the context
        finally:
            _IN_METRICS_SERVER.reset(token)
        try:
            yield
        finally:
            server.should_exit = True
            await task
            if self.sock is None:
                sock.close()
