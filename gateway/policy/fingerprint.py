"""``system_fingerprint``: what serves an answer, for engines that send none.

OpenAI's ``system_fingerprint`` changes when the backend configuration that serves
the request changes, so a client keeping (seed, fingerprint) pairs can tell when a
replay may give another text. The engines behind the gateway send none (or null), so
the gateway answers one made of what serves the request: the deployment (when the
gateway serves several; None until then), the engine's identity (``upstream.identity``,
else its URL), the policy (its file's SHA-256) and the route's measured seed guarantee
(``guarantees.seed``, written by ``ft-gateway probe``). It is computed once per policy
load; gateway/proxy/fingerprint.py puts it into the answers.
"""

from __future__ import annotations

import hashlib

from gateway.policy.engine import Policy

UNMEASURED = "unmeasured"


def fingerprint(
    *, engine: str, policy_digest: str, seed: str | None, deployment: str | None = None
) -> str:
    """``fp_`` and ten hex digits (OpenAI's form) over what serves the request."""
    parts = (deployment or "", engine, policy_digest, seed or UNMEASURED)
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=5).hexdigest()
    return f"fp_{digest}"


class Fingerprints:
    """The fingerprint of each route under the current policy, computed once per policy
    load. ``deployment``: the name of the deployment the gateway serves, when it serves
    several (fleets); None until then."""

    def __init__(self, *, engine: str, deployment: str | None = None) -> None:
        self.engine = engine
        self.deployment = deployment
        self._policy: Policy | None = None
        self._routes: dict[str, bytes] = {}

    def of(self, policy: Policy, route: str) -> bytes:
        """The fingerprint for ``route`` under ``policy`` (bytes, ready to insert)."""
        if policy is not self._policy:
            self._routes = {
                str(name): fingerprint(
                    engine=self.engine,
                    policy_digest=policy.digest,
                    seed=rules.guarantees.seed,
                    deployment=self.deployment,
                ).encode()
                for name, rules in policy.source.routes.items()
            }
            self._policy = policy
        found = self._routes.get(route)
        if found is None:
            found = fingerprint(
                engine=self.engine,
                policy_digest=policy.digest,
                seed=None,
                deployment=self.deployment,
            ).encode()
        return found
