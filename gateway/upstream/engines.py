"""The engines behind the gateway, asked by model: the seam between the proxy and upstream.

The proxy asks ``upstream_for(model)`` for the client that serves a request's
model; /readyz, GET /v1/models, the metrics wiring and fan-out ask the same
seam. Today every model is served by one pool (one engine, or a Balancer over
its replicas); several deployments, picked by model, come in through here.
"""

from __future__ import annotations

from gateway.upstream.base import UpstreamClient


class Engines:
    """The upstream clients of the gateway, by model (one pool for all today)."""

    def __init__(self, pool: UpstreamClient) -> None:
        self.pool = pool

    def upstream_for(self, model: str | None) -> UpstreamClient:
        """The client that serves ``model`` (None: any, e.g. a model list or a probe)."""
        return self.pool

    def pools(self) -> tuple[UpstreamClient, ...]:
        """Every client, once each (for metrics, discovery and closing)."""
        return (self.pool,)

    async def aclose(self) -> None:
        """Close every pool's connections."""
        for pool in self.pools():
            await pool.aclose()
