"""What the proxy tells the balancer about one request: its affinity key and priority.

The proxy reads these from the request as the client sent it, before the
policy changes the body, and keeps them on the request's Call; the balancer
reads them (``UpstreamClient.request``'s ``hint``) when it picks a replica.
The other upstream clients take the argument and ignore it.
"""

from __future__ import annotations

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
        content: str = "messages",
    ) -> Hint:
        """The request's Hint; ``content``: the field its route keeps the conversation in."""
        priority = BATCH if profile is not None and profile in self.low else INTERACTIVE
        if self.affinity is not None:
            found = affinity_key(
                body, headers, client=client, config=self.affinity, content=content
            )
            if found is not None:
                return Hint(found[0], found[1], priority)
        return Hint(priority=priority) if priority != INTERACTIVE else NO_HINT
