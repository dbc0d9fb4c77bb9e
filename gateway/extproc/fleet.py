"""The fleet as the processor reads it: each client-facing model name's placement (the
pure table of deployments.py) and each deployment's policy, swapped whole on reload.

The proxy opens a pool per deployment (fleet/engines.py); the processor sends nothing
to an engine, so it keeps the table and the policies alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.deployments import Placement, place, placements
from gateway.policy.engine import Policy
from gateway.settings import Settings


class Fleet:
    """Model name -> (deployment, served name) and deployment -> policy; empty rows: one
    deployment, whose policy is the gateway's live one."""

    __slots__ = ("rows", "policies", "key")

    def __init__(self, settings: Settings, policies: Mapping[str, Policy]) -> None:
        self.rows: dict[str, Placement] = placements(settings.deployments)
        self.policies = dict(policies)
        self.key = fleet_key(settings, policies)

    def place(self, model: object) -> tuple[Placement, Policy]:
        """``model``'s placement and its deployment's policy (the errors of deployments.py's
        ``place`` for a name no deployment serves)."""
        row = place(self.rows, model)
        return row, self.policies[row.deployment.name]


def fleet_key(settings: Settings, policies: Mapping[str, Policy]) -> list[Any]:
    """What a reload compares: each deployment as configured and its policy's digest."""
    return [(d, policies[d.name].digest) for d in settings.deployments]
