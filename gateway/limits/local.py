"""The counters of one process: a dict of GCRA states, changed on the event loop."""

from __future__ import annotations

import time

from gateway.limits.gcra import Limit, Verdict, acquire, release


class LocalStore:
    """Every key's state in this process's memory (exact for one process)."""

    kind = "local"

    def __init__(self) -> None:
        self._states: dict[str, list[float]] = {}

    async def acquire(self, bucket: str, limit: Limit, tokens: int) -> tuple[Verdict, str]:
        state = self._states.get(bucket)
        if state is None:
            state = self._states[bucket] = [0.0, 0.0, 0.0, 0.0]
        return acquire(state, limit, time.time(), tokens), ""

    async def release(
        self, bucket: str, limit: Limit, *, reserved: int, used: int, lease: str
    ) -> None:
        state = self._states.get(bucket)
        if state is not None:
            release(state, limit, time.time(), reserved=reserved, used=used)

    async def aclose(self) -> None:
        return None
