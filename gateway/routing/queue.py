"""The gateway's queue in front of replicas at their in-flight limit.

An engine runs a bounded batch; past it, requests wait inside the engine
where nobody can see or shed them. With ``upstream.max_in_flight`` the
balancer sends a replica at most that many requests and holds the rest here:
by priority (interactive keys before batch keys), first come first served
within one, each for at most ``timeout`` seconds (then 503 with
``Retry-After``), at most ``size`` of them (more get 503 at once). A slot
freed on any replica goes to the head of the queue at once, already counted
on its replica, so no newcomer can take it in between. A waiter whose task is
cancelled (its client left) leaves the queue at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from gateway.errors import Overloaded
from gateway.routing.hint import BATCH, INTERACTIVE, Hint

T = TypeVar("T")
PRIORITY_NAMES = {INTERACTIVE: "interactive", BATCH: "batch"}
RETRY_AFTER = "1"


class _Waiter(Generic[T]):
    __slots__ = ("hint", "tried", "future", "since")

    def __init__(self, hint: Hint, tried: set[T], future: asyncio.Future[T]) -> None:
        self.hint = hint
        self.tried = tried
        self.future = future
        self.since = time.perf_counter()


class AdmissionQueue(Generic[T]):
    """Requests waiting for a replica slot; ``offer`` hands out freed slots."""

    def __init__(
        self,
        *,
        size: int,
        timeout: float,
        give_back: Callable[[T], None],
        on_wait: Callable[[str, float], None],
        on_shed: Callable[[str], None],
    ) -> None:
        self.size = size
        self.timeout = timeout
        self._on_wait = on_wait  # (admitted | timeout | left, seconds waited)
        self._on_shed = on_shed  # full | timeout
        self._give_back = give_back  # a slot handed to a waiter that had already gone
        self._lanes: dict[int, deque[_Waiter[T]]] = {INTERACTIVE: deque(), BATCH: deque()}

    def __len__(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    def depth(self) -> dict[str, int]:
        """Waiting requests by priority name."""
        return {PRIORITY_NAMES[p]: len(lane) for p, lane in self._lanes.items()}

    async def wait(self, hint: Hint, tried: set[T]) -> T:
        """A replica slot (already counted on it), once ``offer`` finds one; Overloaded
        when the queue is full or the wait times out."""
        if len(self) >= self.size:
            self._on_shed("full")
            raise Overloaded(
                f"Every engine replica is at its limit of requests in flight and {self.size} "
                "requests are already waiting; retry later.",
                headers={"Retry-After": RETRY_AFTER},
            )
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(hint, tried, future)
        lane = self._lanes[hint.priority if hint.priority in self._lanes else BATCH]
        lane.append(waiter)
        try:
            async with asyncio.timeout(self.timeout):
                return await waiter.future
        except TimeoutError:
            if _granted(waiter.future):  # the slot came as the time ran out: take it
                return waiter.future.result()
            _leave(lane, waiter)
            self._on_wait("timeout", time.perf_counter() - waiter.since)
            self._on_shed("timeout")
            raise Overloaded(
                f"Every engine replica stayed at its limit of requests in flight for "
                f"{self.timeout:g} s while this request waited; retry later.",
                headers={"Retry-After": RETRY_AFTER},
            ) from None
        except asyncio.CancelledError:
            if _granted(waiter.future):
                self._give_back(waiter.future.result())
            else:
                _leave(lane, waiter)
                self._on_wait("left", time.perf_counter() - waiter.since)
            raise

    def offer(self, place: Callable[[Hint, set[T]], T | None]) -> None:
        """Give free slots to the waiters, by priority then age: ``place`` finds (and
        counts) a slot for a waiter's hint, or None when there is none."""
        for lane in self._lanes.values():
            while lane:
                waiter = lane[0]
                if waiter.future.done():  # cancelled: its task is on its way out
                    lane.popleft()
                    continue
                found = place(waiter.hint, waiter.tried)
                if found is None:
                    return
                lane.popleft()
                waiter.future.set_result(found)
                self._on_wait("admitted", time.perf_counter() - waiter.since)


def _leave(lane: deque[_Waiter[T]], waiter: _Waiter[T]) -> None:
    if waiter in lane:  # ``offer`` may have dropped it already
        lane.remove(waiter)


def _granted(future: asyncio.Future[T]) -> bool:
    return future.done() and not future.cancelled()
