"""Which replica takes a request: least in flight, or affinity with bounded load.

Both skip replicas that are out of service (ejected), draining (gone from
DNS) or already tried for this request, and, when a per-replica limit is set,
replicas at it (``cap``). None means no replica may take the request now.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from gateway.routing.ring import Ring, load_bound


class Slot(Protocol):
    """What a picker needs to know of a replica."""

    in_flight: int
    draining: bool

    @property
    def in_service(self) -> bool: ...


R = TypeVar("R", bound=Slot)


def _usable(replica: Slot, tried: set[R], cap: int | None) -> bool:
    return (
        replica.in_service
        and not replica.draining
        and replica not in tried
        and (cap is None or replica.in_flight < cap)
    )


def least_in_flight(
    replicas: Sequence[R], *, start: int, tried: set[R], cap: int | None
) -> int | None:
    """The index of the usable replica with the fewest requests in flight; ties go to
    the first one from ``start`` round the list."""
    count = len(replicas)
    best: int | None = None
    for step in range(count):
        index = (start + step) % count
        replica = replicas[index]
        if _usable(replica, tried, cap) and (
            best is None or replica.in_flight < replicas[best].in_flight
        ):
            best = index
    return best


def bounded_affinity(
    ring: Ring[R],
    key: int,
    *,
    tried: set[R],
    cap: int | None,
    load_factor: float,
) -> tuple[R, bool] | None:
    """(replica, spilled) for ``key``: the first usable replica clockwise from it whose
    load is under the bound; ``spilled`` when that is not the key's home (the first
    replica in service clockwise)."""
    live = [r for r in ring.members if r.in_service and not r.draining]
    if not live:
        return None
    bound = load_bound(sum(r.in_flight for r in live), len(live), load_factor)
    fallback: R | None = None
    home: R | None = None
    for replica in ring.walk(key):
        if home is None and replica.in_service and not replica.draining:
            home = replica
        if _usable(replica, tried, cap):
            if replica.in_flight < bound:
                return replica, replica is not home
            fallback = fallback or replica
    # Only replicas over the bound are left (the others were tried): the nearest.
    return (fallback, True) if fallback is not None else None
