"""The Batch API as the app factory wires it: the store, the runner, the routes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from starlette.routing import Route

from gateway._types import Endpoint
from gateway.batches.api import BatchApi
from gateway.batches.runner import BatchRunner, Keys
from gateway.batches.store import BatchStore, make_batch_store
from gateway.proxy.endpoint import ProxyEndpoint
from gateway.state import GatewayState


@dataclass
class BatchService:
    """One gateway's Batch API."""

    store: BatchStore
    runner: BatchRunner
    api: BatchApi

    @classmethod
    def make(
        cls, state: GatewayState, proxied: Mapping[tuple[str, str], Endpoint], *, keys: Keys
    ) -> BatchService | None:
        """The service ``state.settings.batches`` asks for (None: off), its lines sent
        through in-process endpoints over the live ones' route objects."""
        settings = state.settings.batches
        if not settings.enabled:
            return None
        endpoints = {
            path: ProxyEndpoint(state, endpoint.route, inprocess=True)
            for (method, path), endpoint in proxied.items()
            if method == "POST" and isinstance(endpoint, ProxyEndpoint)
        }
        store = make_batch_store(settings)
        runner = BatchRunner(state, store, settings, endpoints=endpoints, keys=keys)
        return cls(store, runner, BatchApi(state, store, settings, runner))

    def routes(self) -> list[Route]:
        """/v1/files and /v1/batches."""
        return self.api.routes()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The runner while the app serves; the store closed after."""
        try:
            async with self.runner.serving():
                yield
        finally:
            await self.store.aclose()
