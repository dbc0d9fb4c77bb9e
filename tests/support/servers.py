"""Real uvicorn servers on free loopback ports, for tests that need real sockets.

``running_server`` runs inside the test's event loop (async tests);
``ServerThread`` runs a server on its own thread and loop (sync tests, e.g. the
synchronous ``openai`` client). Both wait for ``server.started``: never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import AsyncIterator, Generator
from typing import Any

import uvicorn


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_environ() -> dict[str, str]:
    """This process's environment without FT_GATEWAY_* variables, for an ``ft-gateway serve``
    process that must take its settings from its config and flags alone."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}


def _config(app: Any, port: int, host: str = "127.0.0.1", **kwargs: Any) -> uvicorn.Config:
    kwargs.setdefault("log_level", "warning")
    kwargs.setdefault("lifespan", "on")
    return uvicorn.Config(app, host=host, port=port, **kwargs)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the test runner."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.asynccontextmanager
async def running_server(
    app: Any, *, port: int | None = None, host: str = "127.0.0.1", **kwargs: Any
) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop (on ``host``, any loopback address, and ``port``,
    else a free one); yields its base URL."""
    port = port or free_port()
    server = _Server(_config(app, port, host, **kwargs))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn exited before it started")
        await asyncio.sleep(0.005)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task


class ServerThread:
    """Serve ``app`` on a thread with its own event loop; ``url`` once started."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = _Server(_config(app, self.port, **kwargs))
        self._thread = threading.Thread(target=self.server.run, daemon=True)
        self._started = threading.Event()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("uvicorn exited before it started")
            self._started.wait(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)
