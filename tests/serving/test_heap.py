"""The heap start-up leaves: collected once and frozen as the server starts, so that
no full collection walks it again while it serves."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import uvicorn

from gateway.drain import Drain
from gateway.serving.server import DrainingServer

pytestmark = pytest.mark.anyio


async def test_start_up_collects_then_freezes_what_it_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def started(self: uvicorn.Server, sockets: Any = None) -> None:
        return None  # (the sockets and the lifespan are another test's)

    monkeypatch.setattr(uvicorn.Server, "startup", started)
    config = uvicorn.Config(app=lambda scope, receive, send: None)
    server = DrainingServer(config, drain=Drain(), drain_timeout=1.0)

    class Cycle:
        def __init__(self) -> None:
            self.other: Cycle | None = None

    garbage = Cycle()
    garbage.other = garbage
    kept = [Cycle()]
    del garbage
    assert gc.get_freeze_count() == 0
    try:
        await server.startup()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # Out of the collector's reach: the one kept, frozen; the cycle, collected.
        assert not [o for o in gc.get_objects() if type(o) is Cycle]
    finally:
        gc.unfreeze()
    assert [o for o in gc.get_objects() if type(o) is Cycle] == kept  # frozen, not lost
