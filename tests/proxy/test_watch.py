"""Watch: the client's leaving seen through receive() without a task per request, the
server's coroutine stepped from its future's callback, and closed at the end; through
the gateway's own server, a callback its cycle calls (serving/cycle.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.proxy.watch import Watch
from tests.serving.test_cycle import cycle_and_transport
from tests.support.polling import DEADLINE

pytestmark = pytest.mark.anyio

DISCONNECT = {"type": "http.disconnect"}


class Server:
    """A receive() as uvicorn's: each call waits on an event for the next message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.ready = asyncio.Event()
        self.cleaned = 0

    async def receive(self) -> dict[str, Any]:
        try:
            while not self.messages:
                self.ready.clear()
                await self.ready.wait()
            return self.messages.pop(0)
        finally:
            self.cleaned += 1

    def send(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.ready.set()


async def _settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_disconnect_calls_left_with_its_arguments() -> None:
    server, seen = Server(), []
    watch = Watch(server.receive, lambda *args: seen.append(args), "cutoff", "call")
    await _settled()
    assert seen == []
    server.send(DISCONNECT)
    await _settled()
    assert seen == [("cutoff", "call")]
    watch.close()


async def test_other_messages_are_read_past() -> None:
    server, seen = Server(), []
    watch = Watch(server.receive, lambda: seen.append("left"))
    server.send({"type": "http.request", "body": b"", "more_body": False})
    await _settled()
    server.send(DISCONNECT)
    await _settled()
    assert seen == ["left"]
    watch.close()


async def test_closed_before_the_client_leaves_it_stops_where_the_server_waits() -> None:
    server, seen = Server(), []
    watch = Watch(server.receive, lambda: seen.append("left"))
    await _settled()
    watch.close()
    assert server.cleaned == 1  # the server's coroutine ran its cleanup
    server.send(DISCONNECT)
    await _settled()
    assert seen == []
    assert not server.ready._waiters  # nothing left waiting on the event


async def test_a_receive_that_yields_to_the_loop_is_watched_by_a_task() -> None:
    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0)  # a bare yield: no future to hang a callback on
        return DISCONNECT

    watch = Watch(receive, left.set)
    await asyncio.wait_for(left.wait(), DEADLINE)
    watch.close()


async def test_a_receive_that_returns_a_future_is_awaited_by_a_task() -> None:
    left = asyncio.Event()
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    watch = Watch(lambda: future, left.set)
    future.set_result(DISCONNECT)
    await asyncio.wait_for(left.wait(), DEADLINE)
    watch.close()


async def test_the_gateways_server_tells_of_a_hang_up_without_a_coroutine() -> None:
    cycle, transport = cycle_and_transport()
    cycle.flow.pause_reading()  # (the server paused reading the connection)
    seen: list[tuple[Any, ...]] = []
    watch = Watch(cycle.receive, lambda *args: seen.append(args), "cutoff", "call")
    assert not cycle.message_event._waiters  # no receive() waits on the server's event
    assert transport.resumed == 1  # reading resumed, as receive() would
    cycle.disconnected = True  # as uvicorn's protocol marks it, then tells the cycle
    cycle.connection_lost()
    cycle.connection_lost()  # told once
    assert seen == [("cutoff", "call")]
    watch.close()


async def test_a_closed_watch_of_the_gateways_server_is_not_told() -> None:
    cycle, _ = cycle_and_transport()
    seen: list[str] = []
    watch = Watch(cycle.receive, lambda: seen.append("left"))
    watch.close()
    cycle.disconnected = True
    cycle.connection_lost()
    assert seen == []
    # A client that left before the watch began: told at once.
    Watch(cycle.receive, lambda: seen.append("left")).close()
    assert seen == ["left"]
