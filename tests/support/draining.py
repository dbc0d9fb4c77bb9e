"""A stream cut by the drain's time-out, as the tests of each route see it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.faults import DEADLINE
from tests.support.gateways import Gateway


async def cut_by_the_drain(
    gateway: Gateway, path: str, body: dict[str, Any], *, after: str
) -> list[str]:
    """Stream ``body`` to ``path``, let the drain expire once the line ``after`` came, and
    give back the lines the client got after it (the stream's end)."""
    async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
        async with client.stream("POST", path, json=body) as response:
            lines = response.aiter_lines()
            async for line in lines:
                if line == after:
                    break
            gateway.app.state.gateway.drain.expire()
            return [line async for line in lines]
