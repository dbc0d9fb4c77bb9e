"""The reference engine's batcher stepping in the test's own event loop (``running``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from refengine.batcher import Engine


@contextlib.asynccontextmanager
async def running(engine: Engine) -> AsyncIterator[Engine]:
    """``engine`` with its step loop running as a task, cancelled on leaving."""
    task = asyncio.create_task(engine.run())
    try:
        yield engine
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
