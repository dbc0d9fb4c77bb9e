"""A job beside the server (a periodic refresh, a watcher): a task for as long as a
``with`` block lasts, cancelled and awaited when the block ends, however it ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def in_background(job: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run ``job`` as a task while the block runs; cancel it and wait for it after."""
    task = asyncio.create_task(job)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
