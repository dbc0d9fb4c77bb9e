"""Waiting for a state that nothing announces (a balancer's queue, a replica list), by
polling it under a deadline: a bound on how long, never a sleep that guesses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE = 30  # seconds


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; AssertionError naming ``what`` past DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
