"""What the proxy tells the balancer about one request: its affinity key and priority.

The proxy reads these from the request as the client sent it, before the
policy changes the body; the balancer reads them when it picks a replica.
They travel in a context variable rather than through ``UpstreamClient.request``
because every upstream client implements that one signature, and only the
balancer cares: each request runs in its own task, with its own context.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from gateway._types import Headers
from gateway.routing.affinity import affinity_key
from gateway.routing.config import Affinity

INTERACTIVE, BATCH = 0, 1


@dataclass(frozen=True, slots=True)
class Hint:
    """A request's routing facts: where its key came from, the key, its priority."""

    source: str | None = None  # None: no key (least in flight)
    key: int = 0
    priority: int = INTERACTIVE


NO_HINT = Hint()
HINT: ContextVar[Hint] = ContextVar("ft_gateway_routing_hint", default=NO_HINT)


class Hinter:
    """Builds each request's Hint from the routing config (``upstream.affinity``, queue)."""

    def __init__(self, affinity: Affinity | None, *, low_priority_profiles: frozenset[str]) -> None:
        self.affinity = affinity
        self.low = low_priority_profiles

    def hint(
        self,
        body: dict[str, object],
        headers: Headers,
        *,
        client: str | None,
        profile: str | None,
    ) -> Hint:
        """The request's Hint (set it with ``HINT.set`` in the request's task)."""
        priority = BATCH if profile is not None and profile in self.low else INTERACTIVE
        if self.affinity is not None:
            found = affinity_key(body, headers, client=client, config=self.affinity)
            if found is not None:
                return Hint(found[0], found[1], priority)
        return Hint(priority=priority) if priority != INTERACTIVE else NO_HINT
