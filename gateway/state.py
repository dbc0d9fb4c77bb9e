"""What the gateway's endpoints share while it runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway._types import Headers
from gateway.drain import Drain
from gateway.limits.limiter import Limiter
from gateway.observe.capture import BodyCapture
from gateway.observe.exchange import NullObserver, Observer, Tracer
from gateway.policy.engine import Policy
from gateway.policy.fingerprint import Fingerprints
from gateway.routing.hint import Hinter
from gateway.settings import Settings
from gateway.upstream.engines import Engines, Target


class ModelsOfKeys(Protocol):
    """Which models each key may use (gateway/fleet/access.py)."""

    def allowed(self, client: str | None, profile: str | None) -> frozenset[str] | None: ...

    def may_use(self, client: str | None, profile: str | None, model: str) -> bool: ...


class ServedModels(Protocol):
    """The names one deployment serves (gateway/fleet/served.py)."""

    names: frozenset[str | None]  # pass without a call (None: no model named)

    async def admit(self, model: str | None) -> None: ...


class ModelRouting(Protocol):
    """What the endpoint asks of a request's model (gateway/fleet/router.py)."""

    def route(self, call: Any, body: dict[str, Any], content: str) -> Target | None: ...

    def deployment_of(
        self, client: str | None, profile: str | None, model: Any
    ) -> Target | None: ...


@dataclass
class GatewayState:
    """What the endpoints share. ``policy`` is swapped whole on reload: a request
    reads it once, so it finishes under the policy it started with."""

    settings: Settings
    policy: Policy
    observer: Observer = field(default_factory=NullObserver)
    # Checks the client's credentials: returns (client name, policy profile) or
    # raises AuthenticationFailed. None: no keys configured.
    authenticate: Callable[[Headers], tuple[str | None, str | None]] | None = None
    engines: Engines = field(init=False)  # the upstream of each model (opened by the lifespan)
    drain: Drain = field(default_factory=Drain)
    tracer: Tracer | None = None  # None: tracing is off
    hinter: Hinter | None = None  # None: no routing hints (least in flight, no priorities)
    limiter: Limiter | None = None  # None: no rate limits configured
    models: ModelsOfKeys | None = None  # None: every key may use every model
    # Routes requests by model (fleet/router.py); None: one deployment, no key limited.
    router: ModelRouting | None = None
    # The single deployment's served names; None: a fleet (its table refuses the others).
    served: ServedModels | None = None
    capture: BodyCapture | None = None  # None: request bodies are not captured (the default)
    # system_fingerprint for engines that send none (policy/fingerprint.py).
    fingerprints: Fingerprints = field(init=False)

    def __post_init__(self) -> None:
        self.fingerprints = Fingerprints(engine=self.settings.upstream.engine_identity())

    def fingerprint(
        self, route: str | None, target: Target | None, policy: Policy | None
    ) -> bytes | None:
        """The system_fingerprint of ``route``'s answers to a request sent to ``target``
        (a fleet's deployment, else None: the single engine) and judged by ``policy``
        (None: the live one)."""
        if route is None:
            return None
        if target is not None and target.engine.fingerprints is not None:
            return target.engine.fingerprints.of(policy or self.policy, route)
        return self.fingerprints.of(self.policy, route)
