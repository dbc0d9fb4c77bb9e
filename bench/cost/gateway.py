"""Requests through the gateway in this process: an ASGI app called with hand-written
``receive``/``send`` (bench/inprocess.py's ``Call``: no client HTTP stack to measure) in
front of the fast fake engine in its own process over loopback, so latency and CPU time
are the gateway's own, its upstream client's included.

A scenario of such requests is data: ``Request`` rows (the body, the route, the
headers, the settings of the gateway that serves it), one gateway built per distinct
settings and kept open for the run (``through_gateway``).
"""

from __future__ import annotations

import contextlib
import os
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette

from bench.cost.scenario import Case, Context, Setup
from bench.inprocess import CHAT, Call
from gateway.app.factory import create_app
from gateway.settings import Settings, load_settings

Overrides = Mapping[tuple[str, ...], Any]


@dataclass(frozen=True)
class Request:
    """A case that is one request through the gateway."""

    name: str
    body: Mapping[str, Any] | bytes
    path: str = CHAT
    headers: tuple[tuple[bytes, bytes], ...] = ()
    # Settings of the gateway that serves it, over bench defaults (``settings``); a value
    # may be a function of the run's context (the Redis URL of the run).
    settings: Overrides = field(default_factory=dict)
    # The gateway gets a worker directory, as ``serve --workers`` gives each worker.
    workers: bool = False
    share: int = 1
    base: str | None = None

    def encoded(self) -> bytes:
        """The body as sent."""
        return self.body if isinstance(self.body, bytes) else orjson.dumps(self.body)


def settings(url: str, overrides: Overrides = {}) -> Settings:  # noqa: B006 - read only
    """The shipped defaults against the engine at ``url``, with no access log and no
    response store (what is measured is the route, not a file), then ``overrides``;
    none of this environment's FT_GATEWAY_* variables."""
    chosen: dict[tuple[str, ...], Any] = {
        ("upstream", "url"): url,
        ("log", "requests"): False,
        ("store", "backend"): "none",
    }
    chosen |= overrides
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    return load_settings(None, overrides=chosen, environ=environ)


async def open_app(stack: contextlib.AsyncExitStack, chosen: Settings, **kwargs: Any) -> Starlette:
    """A gateway built by ``create_app`` with its lifespan entered on ``stack``."""
    app = create_app(chosen, **kwargs)
    await stack.enter_async_context(app.router.lifespan_context(app))
    return app


def request_call(
    app: Starlette, request: Request, *, sample: bool = False
) -> Callable[[], Awaitable[Any]]:
    """One request of ``request`` per call (anything but a 200 ends the bench). With
    ``sample``, the call reports the traced memory while its answer was being written
    (the ``answering`` figure)."""
    body, headers, path, name = request.encoded(), list(request.headers), request.path, request.name

    async def call() -> None:
        exchange = Call(body, headers, path)
        await app(exchange.scope, exchange.receive, exchange.send)
        if exchange.status != 200:
            raise SystemExit(f"the gateway answered {exchange.status} to {name}")

    async def sampled() -> dict[str, int]:
        exchange = Call(body, headers, path)
        answering = 0

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal answering
            if message["type"] == "http.response.body":
                answering = max(answering, tracemalloc.get_traced_memory()[0])
            await exchange.send(message)

        await app(exchange.scope, exchange.receive, send)
        if exchange.status != 200:
            raise SystemExit(f"the gateway answered {exchange.status} to {name}")
        return {"answering": answering}

    return sampled if sample else call


def through_gateway(
    requests: list[Request] | Callable[[Context], list[Request]], *, sample: bool = False
) -> Setup:
    """A setup whose cases are ``requests`` (or those built from the run's options), each
    sent to a gateway of its settings, built once per distinct settings."""

    @contextlib.asynccontextmanager
    async def setup(ctx: Context) -> AsyncIterator[list[Case]]:
        rows = requests(ctx) if callable(requests) else requests
        client = ctx.options.get("client") or None
        async with contextlib.AsyncExitStack() as stack:
            apps: dict[str, Starlette] = {}
            cases = []
            for row in (r for r in rows if ctx.wanted(r.name)):
                overrides = {k: v(ctx) if callable(v) else v for k, v in row.settings.items()}
                if client is not None:
                    overrides[("upstream", "client")] = client
                key = repr((sorted(overrides.items()), row.workers))
                if key not in apps:
                    kwargs: dict[str, Any] = {}
                    if row.workers:
                        kwargs["worker_dir"] = ctx.directory / f"workers-{len(apps)}"
                        kwargs["worker_dir"].mkdir()
                    chosen = settings(ctx.engine_url(), overrides)
                    apps[key] = await open_app(stack, chosen, **kwargs)
                call = request_call(apps[key], row, sample=sample)
                info = {"request bytes": str(len(row.encoded()))} if sample else {}
                cases.append(Case(row.name, call, share=row.share, base=row.base, info=info))
            yield cases

    return setup
