"""How many of a batch's lines a deployment gets at once: a cap that gives way to
interactive traffic.

Each deployment has a Pace. A line takes a slot before it is sent and gives it
back when its answer is in. The cap starts at ``batches.concurrency`` and
moves with what the deployment's queue shows (``upstream.max_in_flight``,
docs/routing.md): while interactive requests wait there, each finished line
halves the cap (down to one, so a batch always moves); while none wait, each
finished line raises it by one, back up to ``batches.concurrency``. The lines
themselves wait in that queue behind every interactive request, so the cap
bounds how many engine slots a batch holds when interactive traffic comes
back, and how much of the queue it fills. A deployment without a queue (no
``max_in_flight``) shows nobody waiting: its cap stays at the ceiling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.upstream.balancer import Balancer
from gateway.upstream.base import UpstreamClient


def interactive_waiting(pool: UpstreamClient) -> Callable[[], int]:
    """How many interactive requests wait in ``pool``'s queue (none without one)."""
    if isinstance(pool, Balancer):
        queue = pool.queue
        return lambda: queue.depth()["interactive"]
    return lambda: 0


class Pace:
    """One deployment's slots for batch lines."""

    def __init__(self, ceiling: int, waiting: Callable[[], int]) -> None:
        self.ceiling = ceiling
        self.cap = ceiling
        self.in_flight = 0
        self.backoffs = 0  # times the cap was cut (metrics)
        self._waiting = waiting
        self._freed = asyncio.Condition()

    async def take(self) -> None:
        """A slot, once the line in flight are fewer than the cap."""
        async with self._freed:
            while self.in_flight >= self.cap:
                await self._freed.wait()
            self.in_flight += 1

    async def give(self) -> None:
        """The slot back, the cap moved by what the queue shows now."""
        async with self._freed:
            self.in_flight -= 1
            if self._waiting() > 0:
                self.back_off()
            elif self.cap < self.ceiling:
                self.cap += 1
            self._freed.notify_all()

    def back_off(self) -> None:
        """Halve the cap (interactive requests wait, or the engines shed a line)."""
        if self.cap > 1:
            self.cap = max(1, self.cap // 2)
            self.backoffs += 1
