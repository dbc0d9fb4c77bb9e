"""An engine stream ends for the client at its ``data: [DONE]``: what an engine sends
after it is not read (past a small allowance for the body's own end) and does not keep
the client's answer open; a well-behaved engine whose body ends a moment after its
``[DONE]`` still keeps its connection.

Over every upstream client, against the raw-socket engine of tests/support (rawengine.py)
behind a real gateway on loopback.
"""

from __future__ import annotations

import asyncio

import anyio
import httpx
import pytest

from gateway.settings import Settings
from tests.support.bodies import CHAT, DONE, chat, sse_events
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE, HELD, fault_settings
from tests.support.gateways import Gateway
from tests.support.rawengine import after_done, answers_own, done_then_end_when

pytestmark = pytest.mark.anyio
FLOOD = 64 << 20


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    # Long engine time-outs: only the gateway's own reading of [DONE] may end the stream.
    return fault_settings(fake_engine.url, client=upstream_client, **HELD)


def asking(who: str) -> dict[str, object]:
    return chat(messages=[{"role": "user", "content": who}], stream=True)


async def stream_text(client: httpx.AsyncClient, who: str) -> str:
    async with client.stream("POST", CHAT, json=asking(who)) as response:
        assert response.status_code == 200
        return (await response.aread()).decode()


async def test_what_follows_done_is_not_read(fake_engine: FakeEngine, gateway: Gateway) -> None:
    fake_engine.handler = after_done(total=FLOOD)
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            text = await stream_text(client, "alice")
            seen = fake_engine.requests[0]
            await seen.connection.closed.wait()
    events = sse_events(text)
    assert events[-1] == DONE.decode().strip() and '"alice"' in events[0]
    assert "after the end" not in text and '"error"' not in text
    # The gateway closed the engine's connection near [DONE]: the engine got out that
    # and the sockets' buffers, never the 64 MiB it had.
    assert seen.sent < FLOOD // 4, seen.sent


async def test_the_stream_ends_at_done_before_the_engine_ends_its_body(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    go = asyncio.Event()
    fake_engine.handler = done_then_end_when(go)
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            # The engine's body ends only after the client has its whole answer.
            text = await stream_text(client, "alice")
            go.set()
            fake_engine.handler = answers_own
            after = await client.post(CHAT, json=chat(messages=[{"role": "user", "content": "b"}]))
    assert sse_events(text)[-1] == "data: [DONE]" and '"error"' not in text
    assert after.status_code == 200
