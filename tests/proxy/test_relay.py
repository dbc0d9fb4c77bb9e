"""The SSE relay as a plain async generator: no HTTP needed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from gateway.errors import UpstreamTimeout
from gateway.proxy.relay import DONE, relay_stream
from tests.support.bodies import sse_events

pytestmark = pytest.mark.anyio


async def test_each_chunk_comes_out_before_the_next_goes_in() -> None:
    gate = asyncio.Event()
    produced: list[bytes] = []

    async def engine() -> AsyncIterator[bytes]:
        for index in range(3):
            chunk = f'data: {{"i": {index}}}\n\n'.encode()
            produced.append(chunk)
            yield chunk
            await gate.wait()  # the engine "thinks" until the test lets it go on
            gate.clear()
        produced.append(DONE)
        yield DONE

    out = relay_stream(engine())
    for index in range(3):
        chunk = await asyncio.wait_for(out.__anext__(), timeout=5)
        assert chunk == produced[-1] == f'data: {{"i": {index}}}\n\n'.encode()
        gate.set()
    assert await out.__anext__() == DONE
    with pytest.raises(StopAsyncIteration):
        await out.__anext__()


async def test_whole_events_pass_unchanged_and_a_split_event_waits_for_its_end() -> None:
    pieces = [b'data: {"a"', b": 1}\n", b"\ndata: [DO", b"NE]\n\n"]

    async def engine() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    # A client acts only on whole events: the halves of one are sent together.
    assert [c async for c in relay_stream(engine())] == [b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]


async def test_engine_failure_mid_event_drops_the_broken_event() -> None:
    async def engine() -> AsyncIterator[bytes]:
        yield b'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: {"cho'
        raise UpstreamTimeout("The engine went silent in the middle of the stream.")

    chunks = [c async for c in relay_stream(engine())]
    assert chunks[0] == b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
    events = sse_events(b"".join(chunks[1:]))
    assert json.loads(events[0].removeprefix("data: "))["error"]["code"] == "upstream_timeout"
    assert events[1:] == ["data: [DONE]"]


async def test_stream_without_done_gets_an_error_event() -> None:
    async def engine() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"

    chunks = [c async for c in relay_stream(engine())]
    error = json.loads(chunks[-1].split(b"\n\n")[0].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_protocol_error"
    assert chunks[-1].endswith(DONE)
