"""Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018).

Each member owns ``points`` places on a ring of 64-bit hashes; a key goes to
the first member clockwise from its own hash, so a member that joins or leaves
moves only the keys of its own arcs (about 1/n of them). With a load bound,
a member takes the key only while its load is below
``ceil(load_factor * (total load + 1) / members)``; otherwise the walk goes on
clockwise to the next member, so a hot key spills over to its neighbours
instead of piling onto one member, and no member is ever more than
``load_factor`` times the mean (plus one).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
POINTS = 100


def key_hash(data: bytes) -> int:
    """A 64-bit hash of ``data``, the same in every process (Python's ``hash`` is not)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class Ring(Generic[T]):
    """Members on a hash ring, each placed by ``name(member)`` at ``points`` spots."""

    def __init__(
        self, members: Sequence[T], *, name: Callable[[T], str], points: int = POINTS
    ) -> None:
        placed = sorted(
            (key_hash(f"{name(m)}#{i}".encode()), index)
            for index, m in enumerate(members)
            for i in range(points)
        )
        self.members = list(members)
        self._hashes = [h for h, _ in placed]
        self._owners = [members[index] for _, index in placed]

    def __len__(self) -> int:
        return len(self.members)

    def walk(self, hashed: int) -> Iterator[T]:
        """Every member once, in ring order from ``hashed`` clockwise."""
        owners = self._owners
        count = len(owners)
        if not count:
            return
        start = bisect.bisect_left(self._hashes, hashed)
        seen: set[int] = set()
        for step in range(count):
            member = owners[(start + step) % count]
            if id(member) not in seen:
                seen.add(id(member))
                yield member
                if len(seen) == len(self.members):
                    return

    def owner(self, hashed: int) -> T:
        """The member a key belongs to when load is not counted."""
        return next(self.walk(hashed))


def load_bound(total: int, members: int, factor: float) -> int:
    """The most a member may carry before it takes one more: ``ceil(c (m + 1) / n)``."""
    return math.ceil(factor * (total + 1) / members)
