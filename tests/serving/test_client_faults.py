"""Clients that misbehave: hang up early, read slowly, flood or trickle headers,
send bodies just over the limit or with conflicting framing. Raw sockets where
an HTTP library would refuse to misbehave. The ``fake_engine`` and the ``gateway`` (with
this module's ``settings``) are tests/support/fixtures.py's."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx
import orjson
import pytest

from gateway.serving.server import guarded_protocol
from gateway.settings import Settings
from tests.support.bodies import CHAT, chat
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE, HELD, fault_settings
from tests.support.gateways import Gateway, serve_gateway

pytestmark = pytest.mark.anyio
ROUNDS = 10


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    # Long engine time-outs: only the client's leaving may end these requests.
    return fault_settings(fake_engine.url, client=upstream_client, **HELD)


@contextlib.asynccontextmanager
async def connect(url: str) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def request_bytes(body: bytes, *, path: str = CHAT, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: gw", "content-type: application/json"]
    lines += [f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and whatever follows the head, up to the server closing the connection."""
    data = await reader.read()
    if not data:
        return 0, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


async def hang_up(
    engine: FakeEngine,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    first_event: bool = False,
) -> float:
    """Send a request on a connection of its own and hang up once the engine has it (with
    ``first_event``, once the first event came back too); the seconds from the hang-up to
    the engine's connection closing."""
    request_id = uuid.uuid4().hex
    async with connect(url) as (reader, writer):
        head = {"x-request-id": request_id, **headers}
        writer.write(request_bytes(orjson.dumps(body), headers=head))
        await writer.drain()
        received = b""
        while first_event and b"data: " not in received.partition(b"\r\n\r\n")[2]:
            received += await reader.read(65536)
        seen = await engine.wait_for_request(request_id)
        left = time.perf_counter()
    await seen.connection.closed.wait()
    assert seen.connection.closed_at is not None
    return seen.connection.closed_at - left


async def hang_up_rounds(one: Callable[[int], Awaitable[float]]) -> str:
    """``one(round)`` (the seconds of one hang-up) for each of ROUNDS rounds, under one
    deadline: the figure of those times."""
    times = []
    with anyio.fail_after(DEADLINE * 2):
        for index in range(ROUNDS):
            times.append(await one(index))
    ms = sorted(t * 1000 for t in times)
    return (
        f"median {statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms, "
        f"min {ms[0]:.2f} ms over {len(ms)} hang-ups"
    )


async def test_client_leaving_while_sending_its_body_reaches_no_engine(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    request_id = uuid.uuid4().hex
    body = orjson.dumps(chat())
    with anyio.fail_after(DEADLINE):
        async with connect(gateway.url) as (_, writer):
            head = request_bytes(body, headers={"x-request-id": request_id})
            writer.write(head[: len(head) - len(body) // 2])  # half the body, then leave
            await writer.drain()
        exchange = await gateway.recorder.wait_for_request(request_id)
    assert exchange.client_disconnected
    assert fake_engine.requests == []


@pytest.mark.parametrize("moment", ["while waiting", "mid-stream"], ids=["waiting", "mid-stream"])
async def test_client_leaving_closes_the_engine_request(
    fake_engine: FakeEngine,
    gateway: Gateway,
    upstream_client: str,
    figure: Callable[[str, str], None],
    moment: str,
) -> None:
    """The client hangs up while the engine has not answered, or once the first event came
    back with the engine still mid-stream: the engine's connection closes, each time."""

    async def one(index: int) -> float:
        if moment == "while waiting":
            return await hang_up(fake_engine, gateway.url, chat(), {"x-bad-mode": "hang"})
        gate = f"never-{index}"
        headers = {"x-bad-gate": gate, "x-bad-chunks": "5"}
        body = chat(stream=True)
        seconds = await hang_up(fake_engine, gateway.url, body, headers, first_event=True)
        assert not fake_engine.gate(gate).is_set()  # the engine was still mid-stream
        return seconds

    label = f"hang-up {moment} -> engine connection closed ({upstream_client})"
    figure(label, await hang_up_rounds(one))


async def test_slow_reader_holds_back_the_engine_not_the_gateways_memory(
    fake_engine: FakeEngine, upstream_client: str, figure: Callable[[str, str], None]
) -> None:
    chunks, pad = 2000, 16 * 1024  # a 32 MiB stream
    settings = fault_settings(
        fake_engine.url,
        client=upstream_client,
        FT_GATEWAY_LIMITS__MAX_STREAM_BYTES=str(1 << 30),
        FT_GATEWAY_TIMEOUTS__STREAM_IDLE="60",
    )
    request_id = uuid.uuid4().hex
    headers = {"x-request-id": request_id, "x-bad-chunks": str(chunks), "x-bad-bytes": str(pad)}
    async with serve_gateway(settings) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.connect((host, int(port)))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            with anyio.fail_after(60):
                writer.write(request_bytes(orjson.dumps(chat(stream=True)), headers=headers))
                await writer.drain()
                seen = await fake_engine.wait_for_request(request_id)
                # The client reads nothing: wait until the engine can send no more.
                last, still = -1, 0
                while still < 5:
                    await asyncio.sleep(0.05)
                    still = still + 1 if seen.sent == last else 0
                    last = seen.sent
                held = seen.sent
                # Then read it all: nothing was lost while the engine was held back.
                received = await reader.read()
        finally:
            writer.close()
    total = len(received)
    figure(
        f"slow reader: engine held at ({upstream_client})",
        f"{held / 2**20:.1f} MiB sent of a {total / 2**20:.1f} MiB stream "
        "while the client read nothing",
    )
    # Socket buffers on both hops account for a few MiB; an unbounded queue in
    # the gateway would have let the engine send all 32 MiB.
    assert held < 16 * 2**20
    assert total > chunks * pad and received.rstrip().endswith(b"0")
    assert b"data: [DONE]" in received[-64:] and b'"error"' not in received


# Server limits: the protocol ``ft-gateway serve`` runs (httptools, guarded).


@pytest.fixture
async def limited(fake_engine: FakeEngine) -> AsyncIterator[Gateway]:
    async with serve_gateway(
        fault_settings(
            fake_engine.url,
            FT_GATEWAY_SERVER__MAX_HEADER_BYTES="8192",
            FT_GATEWAY_SERVER__HEADER_TIMEOUT="0.5",
            FT_GATEWAY_SERVER__BODY_TIMEOUT="0.5",
            FT_GATEWAY_LIMITS__MAX_BODY_BYTES="4096",
        )
    ) as gw:
        yield gw


async def still_serving(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.post(CHAT, json=chat())).status_code == 200


@pytest.mark.parametrize(
    "head",
    [
        b"".join(b"x-flood-%d: %s\r\n" % (i, b"a" * 100) for i in range(1000)),  # many
        b"x-giant: " + b"a" * (4 << 20) + b"\r\n",  # one header of 4 MiB
    ],
    ids=["many-headers", "one-giant-header"],
)
async def test_header_flood_gets_431_and_is_not_buffered(limited: Gateway, head: bytes) -> None:
    with anyio.fail_after(DEADLINE):
        async with connect(limited.url) as (reader, writer):
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: gw\r\n")
            with contextlib.suppress(OSError):  # the server may close before we finish
                writer.write(head + b"\r\n")
                await writer.drain()
            status, _ = await read_response(reader)
        assert status == 431
        await still_serving(limited.url)


async def test_headers_under_the_limit_pass(limited: Gateway) -> None:
    headers = {f"x-h{i}": "a" * 50 for i in range(60)}  # ~4 KiB
    async with httpx.AsyncClient(base_url=limited.url) as client:
        assert (await client.get("/healthz", headers=headers)).status_code == 200


async def test_slow_headers_get_408_and_the_connection_closed(limited: Gateway) -> None:
    with anyio.fail_after(DEADLINE):
        async with connect(limited.url) as (reader, writer):
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: gw\r\nx-slow: ")  # and then nothing
            await writer.drain()
            status, _ = await read_response(reader)
        assert status == 408
        await still_serving(limited.url)


async def test_idle_new_connection_is_closed(limited: Gateway) -> None:
    with anyio.fail_after(DEADLINE):
        async with connect(limited.url) as (reader, _):
            assert await reader.read() == b""  # closed by the server, nothing said


async def test_slow_body_gets_408(limited: Gateway, fake_engine: FakeEngine) -> None:
    body = orjson.dumps(chat())
    with anyio.fail_after(DEADLINE):
        async with connect(limited.url) as (reader, writer):
            writer.write(request_bytes(body)[:-10])  # the last 10 bytes never come
            await writer.drain()
            status, rest = await read_response(reader)
    assert status == 408
    assert orjson.loads(rest)["error"]["code"] == "request_timeout"
    assert fake_engine.requests == []


@pytest.mark.parametrize("chunked", [False, True])
async def test_body_just_over_the_limit_gets_413(
    limited: Gateway, fake_engine: FakeEngine, chunked: bool
) -> None:
    base = orjson.dumps(chat(messages=[{"role": "user", "content": ""}]))
    pad = 4096 - len(base)
    at_limit = orjson.dumps(chat(messages=[{"role": "user", "content": "a" * pad}]))
    over = orjson.dumps(chat(messages=[{"role": "user", "content": "a" * (pad + 1)}]))
    assert len(at_limit) == 4096 and len(over) == 4097

    async def chunks(data: bytes) -> AsyncIterator[bytes]:
        yield data[:1000]
        yield data[1000:]

    async with httpx.AsyncClient(base_url=limited.url) as client:
        for body, status in ((at_limit, 200), (over, 413)):
            content: Any = chunks(body) if chunked else body
            headers = {"content-type": "application/json"}
            response = await client.post(CHAT, content=content, headers=headers)
            assert response.status_code == status, response.text
    assert len(fake_engine.requests) == 1 and len(fake_engine.requests[0].body) == 4096
    if status == 413:
        assert response.json()["error"]["code"] == "request_too_large"


SMUGGLE = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
    b"content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n"
    b'5\r\n{"a":\r\n0\r\n\r\n'
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\n\r\n{}"
)


@pytest.mark.parametrize("http", ["guarded", "h11"])
async def test_conflicting_content_length_and_transfer_encoding_is_refused(
    fake_engine: FakeEngine, http: str
) -> None:
    settings = fault_settings(fake_engine.url)
    protocol: Any = (
        guarded_protocol(max_head_bytes=65536, head_timeout=5) if http != "h11" else "h11"
    )
    async with serve_gateway(settings, http=protocol) as gw:
        with anyio.fail_after(DEADLINE):
            async with connect(gw.url) as (reader, writer):
                writer.write(SMUGGLE)
                await writer.drain()
                status, rest = await read_response(reader)  # and the connection is closed
        assert status == 400
        assert rest.count(b"HTTP/1.1") == 0  # no second, smuggled response
        await still_serving(gw.url)
    assert len(fake_engine.requests) == 1  # only still_serving's request reached the engine


async def test_connections_past_limit_concurrency_get_503(fake_engine: FakeEngine) -> None:
    settings = fault_settings(fake_engine.url, FT_GATEWAY_SERVER__LIMIT_CONCURRENCY="2")
    async with serve_gateway(settings) as gw, httpx.AsyncClient(base_url=gw.url) as client:
        with anyio.fail_after(DEADLINE):
            async with connect(gw.url), connect(gw.url):
                response = await client.get("/healthz")
                assert response.status_code == 503
            # The two idle connections are gone once the server sees them close.
            while (await client.get("/healthz")).status_code != 200:
                await asyncio.sleep(0.01)
