"""The answer a line's body would get from the live route before any engine sees it:
its model's deployment (the fleet router's seam), that deployment's policy and the
route's own checks (``Route.refusal``), with no request made."""

from __future__ import annotations

from typing import Any

from gateway.batches.validate import Judge
from gateway.errors import GatewayError
from gateway.proxy.route import Route
from gateway.state import GatewayState
from gateway.upstream.engines import Target


def target_of(
    state: GatewayState, client: str | None, profile: str | None, model: Any
) -> Target | None:
    """The deployment a key's request for ``model`` goes to (None: the single one);
    the error the key gets for it raised."""
    router = state.router
    return None if router is None else router.deployment_of(client, profile, model)


def judge_for(
    state: GatewayState, route: Route, *, client: str | None, profile: str | None
) -> Judge:
    """The Judge of a batch's lines, for its key."""

    def judge(body: dict[str, Any]) -> GatewayError | None:
        try:
            target = target_of(state, client, profile, body.get("model"))
        except GatewayError as exc:
            return exc
        policy = state.policy
        if target is not None:
            policy = target.engine.policy or policy
            if target.alias:
                body = {**body, "model": target.served}
        return route.refusal(body, policy=policy, profile=profile)

    return judge
