"""The model names the metrics label by: those the config gives, never a client's.

A request's ``model`` is the client's to choose; as a label it would let one
client grow the series, or, capped first come first served, push the real
models out under ``(other)``. So the labels are the names the operator wrote: a
fleet's served names and aliases, the names ``model_access`` and
``rate_limits.models`` list, and the policies' model overlays; every other name
counts as ``(other)``. A reload names them again.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.policy.engine import Policy
from gateway.settings import Settings


def configured_models(settings: Settings, policies: Iterable[Policy]) -> frozenset[str]:
    """Every model name ``settings`` and ``policies`` give."""
    names: set[str] = set()
    for deployment in settings.deployments:
        names.update(deployment.names())
    access = settings.model_access
    for listed in (*access.keys.values(), *access.profiles.values()):
        names.update(listed)
    names.update(settings.rate_limits.models)
    for policy in policies:
        names.update(policy.source.models)
    return frozenset(names)
