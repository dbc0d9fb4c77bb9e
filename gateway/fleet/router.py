"""The model's part of a request's path, in one place: after the body is parsed and
before the policy, the key's models are checked and (in a fleet) the model picks the
deployment, its policy and the name its engine gets.

The endpoint asks it only when there is something to do (``GatewayState.router`` is
None for one deployment with no key limited to models), so the single-deployment
path costs one attribute test.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway._types import Headers
from gateway.deployments import unplaced
from gateway.errors import ModelNotFound
from gateway.observe.exchange import Exchange
from gateway.policy.engine import Policy
from gateway.routing.hint import Hint
from gateway.state import GatewayState
from gateway.upstream.engines import Target


class Call(Protocol):
    """What the router reads and writes of a request (proxy/call.py's Call): a protocol,
    so that the reloader, which builds a router, imports no proxy."""

    headers: Headers
    record: Exchange
    profile: str | None
    target: Target | None
    policy: Policy | None
    hint: Hint


class ModelRouter:
    """Routes a request by its ``model`` (the state's live keys and engines, read once)."""

    __slots__ = ("state",)

    def __init__(self, state: GatewayState) -> None:
        self.state = state

    def route(self, call: Call, body: dict[str, Any], content: str) -> Target | None:
        """The request's deployment and served name (None: the single deployment);
        ModelNotFound for a model its key may not use or no deployment serves, or the
        400 of a missing or non-string model in a fleet or from a key limited to models.
        A fleet's routing hint is its deployment's (``content``: the field the route
        keeps the conversation in)."""
        record = call.record
        target = self.deployment_of(record.client, call.profile, body.get("model"))
        if target is None:
            return None
        call.target = target
        engine = target.engine
        call.policy = engine.policy
        record.deployment = engine.name
        record.served = target.served
        hinter = engine.hinter
        if hinter is not None:
            # From the body as sent: the policy may strip prompt_cache_key.
            call.hint = hinter.hint(
                body, call.headers, client=record.client, profile=call.profile, content=content
            )
        return target

    def deployment_of(self, client: str | None, profile: str | None, model: Any) -> Target | None:
        """The deployment and served name of ``model`` for a key (None: the single
        deployment), or the error the key gets for it: the model's step of a request
        without the request (a batch's validation asks it of each line)."""
        state = self.state
        gate = state.models
        if gate is not None:
            if isinstance(model, str):
                if not gate.may_use(client, profile, model):
                    raise ModelNotFound(model)
            elif gate.allowed(client, profile) is not None:
                # No model named is the engine's own, which the key may not be allowed
                # (/tokenize, /detokenize): a key limited to models names one.
                raise unplaced(model)
        engines = state.engines
        if not engines.fleet:
            return None
        return engines.target(model)


def needs_router(state: GatewayState) -> bool:
    """Whether requests must be routed by model: a fleet, or keys limited to models."""
    return bool(state.settings.deployments) or state.models is not None
