"""The admission queue on its own: priority, order, size, time-out, a waiter that leaves."""

from __future__ import annotations

import asyncio

import pytest

from gateway.errors import Overloaded
from gateway.routing.hint import BATCH, INTERACTIVE, Hint
from gateway.routing.queue import AdmissionQueue


class Record:
    def __init__(self) -> None:
        self.waits: list[str] = []
        self.shed: list[str] = []
        self.given_back: list[str] = []


def queue_of(record: Record, *, size: int = 8, timeout: float = 30.0) -> AdmissionQueue[str]:
    return AdmissionQueue(
        size=size,
        timeout=timeout,
        give_back=record.given_back.append,
        on_wait=lambda outcome, seconds: record.waits.append(outcome),
        on_shed=record.shed.append,
    )


async def queued(queue: AdmissionQueue[str], count: int) -> None:
    while len(queue) < count:
        await asyncio.sleep(0)


@pytest.mark.anyio
async def test_interactive_waiters_go_before_batch_ones_then_by_age() -> None:
    record = Record()
    queue = queue_of(record)
    order = [("b1", BATCH), ("i1", INTERACTIVE), ("b2", BATCH), ("i2", INTERACTIVE)]
    tasks = {}
    for name, priority in order:
        tasks[name] = asyncio.create_task(queue.wait(Hint(priority=priority), set()))
        await queued(queue, len(tasks))
    assert queue.depth() == {"interactive": 2, "batch": 2}
    slots = iter(["s1", "s2", "s3", "s4"])
    granted: list[Hint] = []

    def place(hint: Hint, tried: set[str]) -> str | None:
        granted.append(hint)
        return next(slots, None)

    queue.offer(place)
    results = {name: await task for name, task in tasks.items()}
    assert results == {"i1": "s1", "i2": "s2", "b1": "s3", "b2": "s4"}
    assert record.waits == ["admitted"] * 4 and len(queue) == 0


@pytest.mark.anyio
async def test_offer_stops_when_no_slot_is_free() -> None:
    record = Record()
    queue = queue_of(record)
    tasks = [asyncio.create_task(queue.wait(Hint(), set())) for _ in range(2)]
    await queued(queue, 2)
    queue.offer(lambda hint, tried: None)
    assert len(queue) == 2
    queue.offer(lambda hint, tried: "slot")
    assert await asyncio.gather(*tasks) == ["slot", "slot"]


@pytest.mark.anyio
async def test_a_full_queue_sheds_at_once() -> None:
    record = Record()
    queue = queue_of(record, size=1)
    first = asyncio.create_task(queue.wait(Hint(), set()))
    await queued(queue, 1)
    with pytest.raises(Overloaded) as caught:
        await queue.wait(Hint(), set())
    assert caught.value.status == 503 and caught.value.headers == {"Retry-After": "1"}
    assert record.shed == ["full"]
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert record.waits == ["left"] and len(queue) == 0


@pytest.mark.anyio
async def test_a_wait_past_the_timeout_is_503() -> None:
    record = Record()
    queue = queue_of(record, timeout=0.01)
    with pytest.raises(Overloaded) as caught:
        await queue.wait(Hint(), set())
    assert caught.value.code == "engine_overloaded"
    assert record.shed == ["timeout"] and record.waits == ["timeout"] and len(queue) == 0


@pytest.mark.anyio
async def test_a_slot_granted_to_a_waiter_that_left_is_given_back() -> None:
    record = Record()
    queue = queue_of(record)
    task = asyncio.create_task(queue.wait(Hint(), set()))
    await queued(queue, 1)
    queue.offer(lambda hint, tried: "slot")  # granted, but the task has not run yet...
    task.cancel()  # ...and its client leaves first
    with pytest.raises(asyncio.CancelledError):
        await task
    assert record.given_back == ["slot"]


@pytest.mark.anyio
async def test_a_cancelled_waiter_is_skipped_by_offer() -> None:
    record = Record()
    queue = queue_of(record)
    gone = asyncio.create_task(queue.wait(Hint(), set()))
    stays = asyncio.create_task(queue.wait(Hint(), set()))
    await queued(queue, 2)
    gone.cancel()
    await asyncio.sleep(0)  # the cancel reached its future; the task has not cleaned up
    queue.offer(lambda hint, tried: "slot")
    assert await stays == "slot"
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert record.given_back == [] and len(queue) == 0
