"""The fleet opened: one pool of replicas per deployment, and the table from each
client-facing model name to its deployment and served name (upstream/engines.py)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from gateway.deployments import Deployment, Upstream, placements
from gateway.policy.engine import Policy
from gateway.policy.fingerprint import Fingerprints
from gateway.routing.config import Dns
from gateway.routing.hint import Hinter
from gateway.settings import Settings
from gateway.upstream.engines import Engine, Engines, Target
from gateway.upstream.factory import make_upstream


def hinter_for(upstream: Upstream) -> Hinter | None:
    """The routing hints ``upstream`` picks replicas by (None: least in flight, one queue)."""
    if upstream.routing != "affinity" and upstream.max_in_flight is None:
        return None
    return Hinter(
        upstream.affinity if upstream.routing == "affinity" else None,
        low_priority_profiles=frozenset(upstream.queue.low_priority_profiles),
    )


def _auth(key: str | None) -> bytes | None:
    return f"Bearer {key}".encode() if key else None


def open_engines(
    settings: Settings,
    policies: Mapping[str, Policy],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    reuse: Engines | None = None,
) -> Engines:
    """The engines ``settings`` name: the single ``upstream`` serving any model,
    or each deployment's pool with its policy and its models. ``reuse``: the live
    engines (a reload): a deployment whose upstream is unchanged keeps its pool (its
    connections, health and queue); the pools no deployment uses any more are kept
    in ``retired`` (requests in flight finish on them) and closed with the rest."""
    if not settings.deployments:
        single = Engine(
            "",
            make_upstream(settings, transport=transport),
            settings.upstream.url,
            auth=_auth(settings.upstream_api_key()),
        )
        return Engines(single)
    targets: dict[str, Target] = {}
    engines: list[Engine] = []
    old = {e.name: e for e in reuse.engines} if reuse is not None else {}
    for deployment in settings.deployments:
        # The gateway's timeouts and limits, this deployment's engine.
        own = settings.model_copy(update={"upstream": deployment.upstream})
        before = old.get(deployment.name)
        kept = isinstance(before, Engine) and isinstance(before.config, Deployment)
        if before is not None and kept and before.config.upstream == deployment.upstream:
            pool = before.upstream
        else:
            pool = make_upstream(own, transport=transport)
        engine = Engine(
            deployment.name,
            pool,
            deployment.upstream.url,
            policy=policies[deployment.name],
            auth=_auth(own.upstream_api_key()),
            models=tuple(deployment.models),
            owned_by=deployment.owned_by,
            config=deployment,
            hinter=hinter_for(deployment.upstream),
            fingerprints=Fingerprints(
                engine=deployment.upstream.engine_identity(), deployment=deployment.name
            ),
        )
        engines.append(engine)
    by_name = {engine.name: engine for engine in engines}
    for name, row in placements(settings.deployments).items():
        targets[name] = Target(
            by_name[row.deployment.name], row.served, alias=row.alias, hidden=row.hidden
        )
    for deployment in settings.deployments:
        if deployment.failover is not None:
            by_name[deployment.name].failover = by_name[deployment.failover]
    opened = Engines(engines[0], targets, tuple(engines))
    if reuse is not None:
        live_pools = set(map(id, opened.pools()))
        opened.retired = [
            pool for pool in (*reuse.pools(), *reuse.retired) if id(pool) not in live_pools
        ]
    return opened


def engine_dns(settings: Settings, engine: Engine) -> Dns | None:
    """The DNS name ``engine``'s replicas come from, if its deployment has one."""
    for deployment in settings.deployments:
        if deployment.name == engine.name:
            return deployment.upstream.dns
    return None
