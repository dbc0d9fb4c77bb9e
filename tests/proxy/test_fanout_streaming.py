"""``n`` served by fan-out over real sockets: the gateway under uvicorn, the raw-socket
fake engine scripted per choice (the gateway asks for choice i with an X-Request-ID of
its own, derived from the request's: choice_of). The n streams are relayed as their
chunks arrive, a failure in one ends the answer and closes the others, and the client
leaving closes all n.

Runs over each upstream client that ``upstream.client`` allows where connections are
what is checked. The ``fake_engine`` and the ``gateway`` (with this module's
``settings``) are tests/support/fixtures.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from gateway.settings import Settings
from tests.support.bodies import CHAT, DONE, chat, chunk_event, error_event, openai_error, sse
from tests.support.engine import (
    JSON,
    LAST_CHUNK,
    STREAM_HEAD,
    FakeEngine,
    Seen,
    Wire,
    chunk,
    http_response,
)
from tests.support.faults import DEADLINE, HELD, fault_settings
from tests.support.gateways import Gateway, serve_gateway
from tests.support.requestids import choice_id, choice_index, engine_id

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    # Long engine time-outs: only what a test does may end a request.
    return fault_settings(fake_engine.url, client=upstream_client, **HELD)


def choice_of(request: Seen) -> int:
    """Which choice an engine request is for (each client sends a request id: fan_client)."""
    client_id = (request.header(b"x-client-request-id") or b"").decode()
    return choice_index(request.header(b"x-request-id"), client_id)


def fan_client(gateway: Gateway) -> httpx.AsyncClient:
    """A client of ``gateway`` whose requests carry a request id, so that choice_of can
    tell the choices apart."""
    headers = {"x-request-id": "fan"}
    return httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE, headers=headers)


class Stepped:
    """An engine handler: choice i's stream sends its head at once, then its chunk k
    only when the test calls ``step(i, k)``; step ``chunks`` sends ``[DONE]``."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self._steps: defaultdict[tuple[int, int], asyncio.Event] = defaultdict(asyncio.Event)

    def step(self, choice: int, index: int) -> None:
        self._steps[(choice, index)].set()

    async def __call__(self, request: Seen, wire: Wire) -> None:
        i = choice_of(request)
        await wire.send(STREAM_HEAD)
        for k in range(self.chunks):
            await self._steps[(i, k)].wait()
            await wire.send(chunk(chunk_event(f"{i}.{k}")))
        await self._steps[(i, self.chunks)].wait()
        await wire.send(chunk(DONE) + LAST_CHUNK)


async def next_event(lines: AsyncIterator[str]) -> str:
    """The next SSE event (one ``data:`` line) the client reads."""
    line = await anext(lines)
    assert line, "an event, not a blank line"
    assert await anext(lines) == ""
    return line


def payload(event: str) -> Any:
    return json.loads(event.removeprefix("data: "))


async def test_chunks_of_the_n_streams_reach_the_client_as_they_arrive(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    engine = Stepped(chunks=2)
    fake_engine.handler = engine
    # Each chunk is sent by the engine only once the client holds the one before it:
    # no stream waits for another to finish.
    order = [(0, 0), (1, 0), (2, 0), (1, 1), (0, 1), (2, 1)]
    with anyio.fail_after(DEADLINE):
        async with fan_client(gateway) as client:
            body = chat(n=3, stream=True)
            async with client.stream("POST", CHAT, json=body) as response:
                assert response.status_code == 200, await response.aread()
                assert response.headers["x-accel-buffering"] == "no"
                lines = response.aiter_lines()
                ids = set()
                for i, k in order:
                    engine.step(i, k)
                    event = payload(await next_event(lines))
                    assert event["choices"][0]["index"] == i
                    assert event["choices"][0]["delta"]["content"] == f"{i}.{k}"
                    ids.add(event["id"])
                for i in (2, 0):
                    engine.step(i, 2)
                engine.step(1, 2)
                assert await next_event(lines) == "data: [DONE]"
                assert [line async for line in lines] == []
    assert len(ids) == 1


def stalls_after_one_chunk(broken: int | None = None, gate: asyncio.Event | None = None) -> Any:
    """A handler: every stream sends one chunk, then waits for the client to leave; but
    choice ``broken`` then sends an event that is not JSON once ``gate`` is set."""

    async def handler(request: Seen, wire: Wire) -> None:
        i = choice_of(request)
        await wire.send(STREAM_HEAD + chunk(chunk_event(f"{i}")))
        if i == broken and gate is not None:
            await gate.wait()
            await wire.send(chunk(b"data: {not json\n\n") + chunk(DONE) + LAST_CHUNK)
            return
        await wire.until_client_leaves()

    return handler


async def first_events(lines: AsyncIterator[str], n: int) -> list[int]:
    indices = [payload(await next_event(lines))["choices"][0]["index"] for _ in range(n)]
    return sorted(indices)


@contextlib.asynccontextmanager
async def three_streams_begun(
    engine: FakeEngine, gateway: Gateway, handler: Any = None
) -> AsyncIterator[tuple[httpx.Response, AsyncIterator[str]]]:
    """A streamed ``n=3`` request to an engine whose streams each send one chunk and stall
    (``handler``, by default ``stalls_after_one_chunk()``), once the client has read the
    first event of each choice: the response and its lines still to come. Leaving the
    block hangs up."""
    engine.handler = handler or stalls_after_one_chunk()
    async with fan_client(gateway) as client:
        async with client.stream("POST", CHAT, json=chat(n=3, stream=True)) as response:
            lines = response.aiter_lines()
            assert await first_events(lines, 3) == [0, 1, 2]
            yield response, lines


async def all_closed(engine: FakeEngine, *, choices: set[int]) -> None:
    """Return once the engine connection of each choice in ``choices`` is closed."""
    requests = [r for r in engine.requests if choice_of(r) in choices]
    assert len(requests) == len(choices)
    await asyncio.gather(*(r.connection.closed.wait() for r in requests))


async def test_one_stream_failing_ends_the_answer_and_closes_the_others(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    gate = asyncio.Event()
    handler = stalls_after_one_chunk(broken=1, gate=gate)
    with anyio.fail_after(DEADLINE):
        async with three_streams_begun(fake_engine, gateway, handler) as (_, lines):
            gate.set()
            rest = "".join([line + "\n" async for line in lines])
        assert error_event(rest)["code"] == "upstream_protocol_error"  # then [DONE]
        assert rest.count("[DONE]") == 1
        # The two healthy streams were still generating: the gateway closed them.
        await all_closed(fake_engine, choices={0, 2})


async def test_one_stream_going_silent_ends_the_answer_at_its_idle_time_out(
    fake_engine: FakeEngine, upstream_client: str
) -> None:
    """Choice 2 stalls after its first chunk; the others finish. After the (short)
    stream_idle time-out the answer ends with upstream_timeout."""

    async def handler(request: Seen, wire: Wire) -> None:
        i = choice_of(request)
        await wire.send(STREAM_HEAD + chunk(chunk_event(f"{i}")))
        if i == 2:
            await wire.until_client_leaves()
        else:
            await wire.send(chunk(DONE) + LAST_CHUNK)

    fake_engine.handler = handler
    settings = fault_settings(fake_engine.url, client=upstream_client)
    with anyio.fail_after(DEADLINE):
        async with (
            serve_gateway(settings) as gateway,
            fan_client(gateway) as client,
        ):
            response = await client.post(CHAT, json=chat(n=3, stream=True))
        assert error_event(response.text)["code"] == "upstream_timeout"
        await all_closed(fake_engine, choices={2})


async def test_client_hang_up_closes_all_n_engine_requests(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    with anyio.fail_after(DEADLINE):
        async with three_streams_begun(fake_engine, gateway) as (response, _):
            pass  # Leaving the block closes the connection: the client hung up.
        await all_closed(fake_engine, choices={0, 1, 2})
        exchange = await gateway.recorder.wait_for_request(response.headers["x-request-id"])
    assert exchange.client_disconnected


async def test_client_hang_up_before_the_answers_closes_all_n(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async def silent(request: Seen, wire: Wire) -> None:
        await wire.until_client_leaves()

    fake_engine.handler = silent
    with anyio.fail_after(DEADLINE):
        async with fan_client(gateway) as client:
            async with anyio.create_task_group() as tg:
                headers = {"x-request-id": "leaves"}
                tg.start_soon(lambda: client.post(CHAT, json=chat(n=3), headers=headers))
                for i in range(3):
                    await fake_engine.wait_for_request(choice_id(engine_id("leaves"), i).decode())
                tg.cancel_scope.cancel()  # the client gives up and closes its socket
        await all_closed(fake_engine, choices={0, 1, 2})


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failure_before_the_answer_starts_closes_the_others_at_once(
    fake_engine: FakeEngine, gateway: Gateway, stream: bool
) -> None:
    """Choice 1 is refused while the others hang (for the 60 s of HELD): the client gets
    the refusal as a status at once, and the other two engine requests are closed."""

    async def handler(request: Seen, wire: Wire) -> None:
        if choice_of(request) == 1:
            error = {"object": "error", "message": "context too long", "code": 400}
            await wire.send(http_response(400, json.dumps(error).encode(), headers=JSON))
            return
        if stream:
            await wire.send(STREAM_HEAD)
        await wire.until_client_leaves()

    fake_engine.handler = handler
    with anyio.fail_after(DEADLINE):
        async with fan_client(gateway) as client:
            response = await client.post(CHAT, json=chat(n=3, stream=stream))
        openai_error(response, 400, message="context too long")
        await all_closed(fake_engine, choices={0, 2})


async def test_drain_expiry_ends_a_fanout_stream_and_closes_all_n(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    with anyio.fail_after(DEADLINE):
        async with three_streams_begun(fake_engine, gateway) as (_, lines):
            gateway.app.state.gateway.drain.expire()
            rest = "".join([line + "\n" async for line in lines])
        assert error_event(rest)["code"] == "shutting_down"
        await all_closed(fake_engine, choices={0, 1, 2})


async def test_the_balancer_spreads_the_n_requests_over_the_replicas() -> None:
    async with FakeEngine() as a, FakeEngine() as b, FakeEngine() as c:
        engines = (a, b, c)
        settings = fault_settings(",".join(e.url for e in engines))
        with anyio.fail_after(DEADLINE):
            async with (
                serve_gateway(settings) as gateway,
                fan_client(gateway) as client,
            ):
                for stream in (False, True):
                    response = await client.post(CHAT, json=chat(n=3, stream=stream))
                    assert response.status_code == 200
                    assert '"index":2' in response.text.replace(" ", "")
    # Each sub-request is in flight on its own: one per replica, each time.
    assert [len(e.requests) for e in engines] == [2, 2, 2]


async def test_usage_is_merged_once_at_the_end_over_real_streams(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async def handler(request: Seen, wire: Wire) -> None:
        i = choice_of(request)
        usage = {"prompt_tokens": 9, "completion_tokens": i + 1, "total_tokens": 10 + i}
        head = {"id": f"c{i}", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        await wire.send(STREAM_HEAD + chunk(chunk_event(f"{i}")))
        await wire.send(chunk(sse({**head, "choices": [], "usage": usage})))
        await wire.send(chunk(DONE) + LAST_CHUNK)

    fake_engine.handler = handler
    body = chat(n=3, stream=True, stream_options={"include_usage": True})
    with anyio.fail_after(DEADLINE):
        async with fan_client(gateway) as client:
            response = await client.post(CHAT, json=body)
    events = [e for e in response.text.split("\n\n") if e]
    assert events[-1] == "data: [DONE]" and events.count("data: [DONE]") == 1
    usage = payload(events[-2])
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}
    assert sum('"choices":[]' in e for e in events) == 1
