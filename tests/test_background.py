"""gateway/background.py: a job runs while its block runs, and has ended when it leaves."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.background import in_background

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("raises", [False, True])
async def test_the_job_runs_during_the_block_and_is_cancelled_and_awaited_after(
    raises: bool,
) -> None:
    started = asyncio.Event()
    ended: list[str] = []

    async def job() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.append("cleaned up")

    with pytest.raises(LookupError) if raises else contextlib.nullcontext():
        async with in_background(job()):
            await started.wait()
            assert ended == []
            if raises:
                raise LookupError
    assert ended == ["cleaned up"]
