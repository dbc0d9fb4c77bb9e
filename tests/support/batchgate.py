"""The probe's load waves, batched for certain on the reference engine.

``wave_gate(app)`` is a probe ``before_wave``: it tells the engine's batcher to hold
its steps until each group of the wave (the loads, then the targets) has arrived
(``Engine.gather``), so the targets share their batches with the loads, behind them,
however the threads and the loaded machine schedule the requests.
"""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette

from gateway.probe.context import BeforeWave
from refengine.batcher import Engine


async def _gather(engine: Engine, groups: tuple[int, ...]) -> None:
    engine.gather(*groups)


def wave_gate(app: Starlette) -> BeforeWave:
    """A ``before_wave`` for the reference engine ``app`` (served on another thread)."""
    engine: Engine = app.state.engine

    def before_wave(groups: tuple[int, ...]) -> None:
        if engine.loop is None:
            raise RuntimeError("the reference engine is not running")
        # Applied before the wave's first request is sent: the caller waits for it.
        asyncio.run_coroutine_threadsafe(_gather(engine, groups), engine.loop).result()

    return before_wave
