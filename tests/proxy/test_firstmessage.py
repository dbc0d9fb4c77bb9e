"""take_first: the first message at once when the server has it, else the rest of the
server's receive() awaited as the coroutine itself would be, a cancellation included."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.proxy.firstmessage import Resumed, take_first

pytestmark = pytest.mark.anyio

BODY = {"type": "http.request", "body": b"{}", "more_body": False}


async def test_a_message_the_server_has_is_taken_at_once() -> None:
    async def receive() -> dict[str, Any]:
        return BODY

    assert take_first(receive) == (BODY, None)


async def test_a_message_still_to_come_is_awaited_from_where_the_step_left_it() -> None:
    arrived = asyncio.Event()
    steps: list[str] = []

    async def receive() -> dict[str, Any]:
        steps.append("started")
        await arrived.wait()
        steps.append("resumed")
        return BODY

    message, rest = take_first(receive)
    assert message is None and isinstance(rest, Resumed)
    assert steps == ["started"]  # run once, up to its wait; not started again
    asyncio.get_running_loop().call_soon(arrived.set)
    assert await rest == BODY
    assert steps == ["started", "resumed"]


async def test_a_cancellation_reaches_the_servers_coroutine() -> None:
    cleaned: list[bool] = []

    async def receive() -> dict[str, Any]:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(True)
        return BODY  # never

    _, rest = take_first(receive)
    assert rest is not None
    waiter = asyncio.ensure_future(_await(rest))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert cleaned == [True]


async def test_an_awaitable_that_is_no_coroutine_is_awaited_as_it_is() -> None:
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    message, rest = take_first(lambda: future)
    assert message is None and rest is future
    future.set_result(BODY)
    assert await rest == BODY


async def _await(rest: Any) -> Any:
    return await rest
