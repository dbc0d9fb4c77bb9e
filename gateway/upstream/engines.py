"""The engines behind the gateway, asked by model: the seam between the proxy and upstream.

The proxy asks ``target(model)`` which deployment serves a request's model (a
dictionary look-up) and under which name; /readyz, GET /v1/models, the metrics
wiring and fan-out ask the same seam. With one deployment (no ``deployments`` in
the config) every model goes to the one pool and the engine decides; with a
fleet (gateway/fleet/) an unknown model reaches no engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.deployments import unplaced
from gateway.errors import ModelNotFound
from gateway.policy.engine import Policy
from gateway.policy.fingerprint import Fingerprints
from gateway.routing.hint import Hinter
from gateway.upstream.base import UpstreamClient


@dataclass(slots=True, eq=False)
class Engine:
    """One deployment, running: its pool of replicas, its policy, its engine key."""

    name: str  # "" for the single deployment
    upstream: UpstreamClient
    replica: str  # what the record names when the pool names no replica
    policy: Policy | None = None  # None: the gateway's live policy (the single deployment)
    auth: bytes | None = None  # the engine's Authorization header
    models: tuple[str, ...] = ()  # the names its engine serves (none: any)
    owned_by: str = "ft-gateway"
    failover: Engine | None = None  # takes its requests when none of its replicas can
    config: Any = None  # its deployment's settings (a reload compares them)
    hinter: Hinter | None = None  # a fleet's: its routing hints (affinity, priority)
    # A fleet's: the system_fingerprint of its answers (its name, its engine's identity).
    fingerprints: Fingerprints | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """Where one client-facing model name goes: its deployment and the served name."""

    engine: Engine
    served: str  # the name the engine gets
    alias: bool = False  # the client's name is rewritten to ``served``
    hidden: bool = False  # an alias left out of GET /v1/models


class Engines:
    """The upstream clients of the gateway, by model."""

    def __init__(
        self,
        default: Engine,
        targets: Mapping[str, Target] | None = None,
        engines: tuple[Engine, ...] = (),
    ) -> None:
        self.default = default  # the single deployment (or the fleet's first)
        self.targets = dict(targets or {})
        self.fleet = bool(targets)
        # Every deployment, in the config's order (a failover may be the target of no name).
        self.engines: tuple[Engine, ...] = engines or (default,)
        # Pools a reload took out of service: closed with the others (requests in
        # flight may still be on them).
        self.retired: list[UpstreamClient] = []

    def target(self, model: object) -> Target:
        """The deployment that serves ``model`` and the name its engine gets; a fleet
        refuses a model no deployment serves (404) and a missing one (400)."""
        # (deployments.py's ``place`` written out: the look-up is the proxy's hot path.)
        found = self.targets.get(model) if isinstance(model, str) else None
        if found is not None:
            return found
        raise ModelNotFound(model) if isinstance(model, str) else unplaced(model)

    def upstream_for(self, model: str | None) -> UpstreamClient:
        """The client that serves ``model`` (None: the first deployment's, e.g. a probe)."""
        found = self.targets.get(model) if model is not None else None
        return (found.engine if found is not None else self.default).upstream

    def pools(self) -> tuple[UpstreamClient, ...]:
        """Every client, once each (for metrics, discovery and closing)."""
        return tuple(engine.upstream for engine in self.engines)

    async def aclose(self) -> None:
        """Close every pool's connections, the retired ones too."""
        for pool in (*self.pools(), *self.retired):
            await pool.aclose()
