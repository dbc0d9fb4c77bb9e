"""The gateway as the tests run it: its settings; in process, in front of a mocked engine
(``MockEngine``, ``asgi_client``); under uvicorn on a loopback port (``serve_gateway``,
``gateway_in_front_of``); an Observer that records what it served."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from gateway.app.factory import create_app
from gateway.observe.exchange import Exchange
from gateway.serving.server import uvicorn_options
from gateway.settings import Settings, load_settings
from tests.support.bodies import ANSWER, MODEL
from tests.support.paths import POLICY
from tests.support.servers import running_server


def gateway_settings(
    upstream: str | None = None,
    *,
    policy: str | Path = POLICY,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[tuple[str, ...], Any] | None = None,
) -> Settings:
    """Settings with no config file and none of this process's environment: the default
    policy (or ``policy``), ``upstream`` as the engine, ``overrides`` as flags would give
    them and ``environ`` as the environment."""
    flags: dict[tuple[str, ...], Any] = {("policy",): str(policy), **(overrides or {})}
    if upstream is not None:
        flags[("upstream", "url")] = upstream
    return load_settings(None, overrides=flags, environ=dict(environ or {}))


def canned(request: httpx.Request) -> httpx.Response:
    """A healthy engine's answer: the model list, or the canned chat completion."""
    if request.url.path == "/v1/models":
        return httpx.Response(200, json={"object": "list", "data": [{"id": MODEL}]})
    return httpx.Response(200, json=ANSWER)


def served(request: httpx.Request) -> httpx.Response:
    """The model list a MockEngine answers the gateway's own question with: the names
    the tests send."""
    return httpx.Response(200, json={"object": "list", "data": [{"id": MODEL}, {"id": "m"}]})


class MockEngine:
    """An engine behind ``httpx.MockTransport`` (``transport``): records each request and
    answers it with ``handler``, by default ``canned``. ``requests`` are those sent for
    a client; ``own`` the gateway's own (its reading of the model list, known by its
    user-agent: gateway/fleet/served.py), answered by ``models`` (default ``served``)."""

    def __init__(
        self,
        handler: Callable[[httpx.Request], httpx.Response] = canned,
        *,
        models: Callable[[httpx.Request], httpx.Response] = served,
    ) -> None:
        self.requests: list[httpx.Request] = []
        self.own: list[httpx.Request] = []
        self.handler = handler
        self.models = models

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("user-agent", "").startswith("ft-gateway/"):
            self.own.append(request)
            return self.models(request)
        self.requests.append(request)
        return self.handler(request)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


@contextlib.asynccontextmanager
async def asgi_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client that calls ``app`` in process (``httpx.ASGITransport``), inside its lifespan."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            yield client


class Recorder:
    """An Observer that keeps every finished exchange and lets a test wait for one."""

    def __init__(self) -> None:
        self.finished_exchanges: list[Exchange] = []
        self._changed = asyncio.Event()

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        self.finished_exchanges.append(exchange)
        self._changed.set()

    async def wait_for_request(self, request_id: str) -> Exchange:
        """The exchange of the request whose X-Request-ID is ``request_id``, once finished."""
        while True:
            for exchange in self.finished_exchanges:
                if exchange.request_id == request_id:
                    return exchange
            self._changed.clear()
            await self._changed.wait()


@dataclass
class Gateway:
    """A gateway serving on a loopback port, and what it served (``recorder``)."""

    url: str
    app: Starlette
    settings: Settings
    recorder: Recorder


@contextlib.asynccontextmanager
async def serve_gateway(settings: Settings, **server: Any) -> AsyncIterator[Gateway]:
    """The gateway under uvicorn with ``ft-gateway serve``'s server options (``server``
    overrides them), observed by a Recorder alone."""
    app = create_app(settings)
    recorder = Recorder()
    app.state.gateway.observer = recorder
    options = {**uvicorn_options(settings), **server}
    async with running_server(app, **options) as url:
        yield Gateway(url, app, settings, recorder)


@contextlib.asynccontextmanager
async def gateway_in_front_of(engine_url: str, *, client: str | None = None) -> AsyncIterator[str]:
    """The gateway with the default policy in front of ``engine_url`` (over upstream client
    ``client``, else the default one), under plain uvicorn on a loopback port; yields its URL."""
    flags: dict[tuple[str, ...], Any] = {} if client is None else {("upstream", "client"): client}
    async with running_server(create_app(gateway_settings(engine_url, overrides=flags))) as url:
        yield url
