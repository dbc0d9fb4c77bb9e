"""What a reload may change of the fleet (app/reload.py swaps the table at once): the
deployments, their models, aliases and policies. Turning the fleet on or off, and a
deployment added with replicas from DNS, take a restart."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway.policy.engine import Policy
from gateway.settings import Settings
from gateway.upstream.engines import Engines
from gateway.yamlsource import Location, Problem


def fleet_reload_problems(
    live: Settings, new: Settings, where: Callable[[Location, str], Problem]
) -> list[Problem]:
    """Why ``new``'s fleet cannot replace ``live``'s without a restart."""
    if bool(live.deployments) != bool(new.deployments):
        return [
            where(("deployments",), "turning the fleet on or off takes a restart (GET /v1/models)")
        ]
    before = {d.name: d.upstream for d in live.deployments}
    return [
        where(("deployments", i, "upstream", "dns"), "a deployment added with dns takes a restart")
        for i, d in enumerate(new.deployments)
        if d.upstream.dns is not None and before.get(d.name) != d.upstream
    ]


def fleet_changed(engines: Engines, new: Settings, policies: Mapping[str, Policy]) -> bool:
    """Whether ``new`` names other deployments (models, aliases, failover, upstream) or
    other policies than the live table."""
    if not engines.fleet:
        return False
    live = [(e.config, e.policy.digest if e.policy else None) for e in engines.engines]
    wanted = [(d, policies[d.name].digest) for d in new.deployments]
    return live != wanted
