"""Real uvicorn servers on free loopback ports, for tests that need real sockets.

``running_server`` runs inside the test's event loop (async tests);
``ServerThread`` runs a server on its own thread and loop (sync tests, e.g. the
synchronous ``openai`` client). Both wait for ``server.started``: never a sleep.
Both hand uvicorn a socket already bound (``listening_socket``), so that no other
process (another pytest-xdist worker, another engineer's suite) can take the port
between the moment it is chosen and the moment the server listens.
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

from bench import ports


def free_port(*, hold: bool = True) -> int:
    """A TCP port on 127.0.0.1 that no other process is given while this one lives
    (bench.ports.free_port, held by default here: every server a test starts binds with
    SO_REUSEADDR). ``hold=False``: only free right now, for a binary that binds without
    SO_REUSEADDR."""
    return ports.free_port(hold=hold)


def listening_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port the kernel picks), for a
    server to listen on: the port is this process's from here on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # As uvicorn's own bind: a test that starts a server again on its port is not
        # refused by the connections of the last one, still in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve_environ() -> dict[str, str]:
    """This process's environment without FT_GATEWAY_* variables, for an ``ft-gateway serve``
    process that must take its settings from its config and flags alone."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}


def _config(app: Any, port: int, host: str = "127.0.0.1", **kwargs: Any) -> uvicorn.Config:
    kwargs.setdefault("log_level", "warning")
    kwargs.setdefault("lifespan", "on")
    return uvicorn.Config(app, host=host, port=port, **kwargs)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the test runner, and whose main
    loop ends as soon as ``should_exit`` is set: uvicorn's looks at it every 0.1 s, so
    each of the suite's server stops waited up to a tenth of a second for nothing (a
    whole tenth for a server stopped just after it started)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._should_exit = False
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._wake is not None:
            loop, event = self._wake
            with contextlib.suppress(RuntimeError):  # the server's loop has closed
                loop.call_soon_threadsafe(event.set)  # from any thread (ServerThread)

    async def main_loop(self) -> None:
        # uvicorn's own loop (a tick each 0.1 s), but the wait ends when should_exit is set.
        wake = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), wake)
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await wake.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.asynccontextmanager
async def running_server(
    app: Any, *, port: int | None = None, host: str = "127.0.0.1", **kwargs: Any
) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop (on ``host``, any loopback address, and ``port``,
    else a free one); yields its base URL."""
    sock = listening_socket(host, port or 0)
    port = sock.getsockname()[1]
    server = _Server(_config(app, port, host, **kwargs))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
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
    finally:
        sock.close()  # uvicorn closes it on shutdown; not if it never started


class ServerThread:
    """Serve ``app`` on a thread with its own event loop; ``url`` once started."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        sock = listening_socket()
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = _Server(_config(app, self.port, **kwargs))
        self._socket = sock
        self._thread = threading.Thread(target=self.server.run, args=([sock],), daemon=True)
        self._started = threading.Event()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                self._socket.close()
                raise RuntimeError("uvicorn exited before it started")
            self._started.wait(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()
