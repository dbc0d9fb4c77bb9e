"""Shared set-up for the fault tests: a gateway on loopback in front of a FakeEngine,
with small time-outs and limits so every failure shows within seconds."""

from __future__ import annotations

import contextlib
import socket
import typing
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette

from gateway.app.factory import create_app
from gateway.observe.exchange import Exchange
from gateway.serving.server import uvicorn_options
from gateway.settings import Settings, Upstream, load_settings
from tests.support.engine import FakeEngine
from tests.support.paths import POLICY as DEFAULT_POLICY
from tests.support.servers import free_port, running_server

POLICY = str(DEFAULT_POLICY)
CLIENTS: tuple[str, ...] = typing.get_args(Upstream.model_fields["client"].annotation)
CHAT = "/v1/chat/completions"
TIMEOUTS = {"connect": 1.0, "response": 1.5, "stream_idle": 0.5}
# Every failure must be answered within the time-outs; this is only how long a
# test waits before it calls the gateway stuck.
DEADLINE = sum(TIMEOUTS.values()) + 10


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}


def fault_settings(upstream: str, *, client: str = "httpx", **env: str) -> Settings:
    environ = {
        "FT_GATEWAY_UPSTREAM__CLIENT": client,
        "FT_GATEWAY_LIMITS__MAX_RESPONSE_BYTES": str(256 * 1024),
        "FT_GATEWAY_LIMITS__MAX_STREAM_BYTES": str(1024 * 1024),
        "FT_GATEWAY_SERVER__HEADER_TIMEOUT": "1",
        "FT_GATEWAY_SERVER__BODY_TIMEOUT": "1",
        **{f"FT_GATEWAY_TIMEOUTS__{k.upper()}": str(v) for k, v in TIMEOUTS.items()},
        **env,
    }
    return load_settings(
        None, overrides={("upstream", "url"): upstream, ("policy",): POLICY}, environ=environ
    )


class Recorder:
    """An Observer that keeps finished exchanges and lets a test wait for one."""

    def __init__(self) -> None:
        import asyncio

        self.finished_exchanges: list[Exchange] = []
        self._changed = asyncio.Condition()
        self._loop = asyncio.get_running_loop()

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        self.finished_exchanges.append(exchange)
        self._loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: typing.Callable[[Exchange], bool]) -> Exchange:
        async with self._changed:
            await self._changed.wait_for(lambda: any(predicate(e) for e in self.finished_exchanges))
        return next(e for e in self.finished_exchanges if predicate(e))


@dataclass
class Gateway:
    url: str
    app: Starlette
    settings: Settings
    recorder: Recorder


@contextlib.asynccontextmanager
async def gateway_for(settings: Settings, **server: Any) -> AsyncIterator[Gateway]:
    """The gateway under uvicorn with ``ft-gateway serve``'s server limits."""
    app = create_app(settings)
    recorder = Recorder()
    app.state.gateway.observer = recorder
    options = {**uvicorn_options(settings), **server}
    async with running_server(app, **options) as url:
        yield Gateway(url, app, settings, recorder)


def refused_url() -> str:
    """A loopback URL nothing listens on (connects are refused at once)."""
    return f"http://127.0.0.1:{free_port()}"


@contextlib.contextmanager
def unanswered_url() -> Iterator[str]:
    """A loopback URL whose listener never accepts and whose accept queue is full, so a
    new connect gets no SYN-ACK and hangs until the client's connect time-out."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


__all__ = ["FakeEngine", "Gateway", "gateway_for", "fault_settings", "chat", "CHAT"]
