"""A deployment's pace: halved by each line that ends while interactive requests wait,
grown back by one per line once none wait, never below one."""

from __future__ import annotations

import asyncio

import pytest

from gateway.batches.pacing import Pace

pytestmark = pytest.mark.anyio


async def test_the_cap_gives_way_to_waiting_requests_and_comes_back() -> None:
    waiting = [0]
    pace = Pace(8, lambda: waiting[0])
    for _ in range(8):
        await pace.take()
    assert pace.in_flight == 8
    waiting[0] = 3
    caps = []
    for _ in range(5):
        await pace.give()
        caps.append(pace.cap)
    assert caps == [4, 2, 1, 1, 1]  # halved each time, never below one
    assert pace.backoffs == 3
    waiting[0] = 0
    for _ in range(3):
        await pace.give()
        caps.append(pace.cap)
    assert caps[-3:] == [2, 3, 4]  # one more per line that ends with none waiting
    assert pace.in_flight == 0


async def test_a_full_pace_holds_the_next_line_until_one_ends() -> None:
    pace = Pace(1, lambda: 0)
    await pace.take()
    second = asyncio.create_task(pace.take())
    await asyncio.sleep(0)
    assert not second.done()
    await pace.give()
    await asyncio.wait_for(second, 5)
    assert pace.in_flight == 1
