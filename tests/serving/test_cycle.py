"""The server's request-response cycle (gateway/serving/cycle.py) and the protocol's
callbacks that start it (serving/server.py): a whole answer in one write, a stream's
head at once, uvicorn's rules for framing kept, over a real server where a socket
tells."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from uvicorn.protocols.http.flow_control import FlowControl

from gateway.serving.cycle import Cycle
from gateway.serving.server import uvicorn_options
from tests.support.gateways import gateway_settings
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio

DATE = (b"date", b"Wed, 02 Dec 2026 20:00:00 GMT")


class _Transport:
    """What a cycle writes, each write apart."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.resumed = 0

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        self.resumed += 1


def cycle_and_transport() -> tuple[Cycle, _Transport]:
    """A cycle on a transport that records its writes and its reading resumed
    (tests/proxy/test_watch.py watches one)."""
    cycle, transport, _ = _cycle()
    return cycle, transport


def _cycle(method: str = "POST", *, keep_alive: bool = True) -> tuple[Cycle, _Transport, list[int]]:
    transport = _Transport()
    answered: list[int] = []
    cycle = Cycle(
        {"type": "http", "method": method},
        transport,  # type: ignore[arg-type]
        FlowControl(transport),  # type: ignore[arg-type]
        logging.getLogger("test"),
        [DATE],
        False,
        keep_alive,
        lambda: answered.append(1),
    )
    return cycle, transport, answered


def _start(status: int, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http.response.start", "status": status, "headers": list(headers)}


def _body(data: bytes, *, more: bool = False) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": more}


async def test_a_whole_answer_is_one_write_of_its_head_and_body() -> None:
    cycle, transport, answered = _cycle()
    await cycle.send(_start(200, (b"Content-Type", b"application/json"), (b"content-length", b"2")))
    assert transport.writes == []  # held for the body
    await cycle.send(_body(b"{}"))
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 20:00:00 GMT\r\n"
        b"content-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    ]
    assert cycle.response_complete and answered == [1] and not transport.closed


async def test_a_streams_head_is_written_at_once_and_its_chunks_framed() -> None:
    cycle, transport, _ = _cycle()
    await cycle.send(_start(200, (b"content-type", b"text/event-stream")))
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 20:00:00 GMT\r\n"
        b"content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    ]
    await cycle.send(_body(b"data: 1\n\n", more=True))
    await cycle.send(_body(b""))
    assert transport.writes[1:] == [b"9\r\ndata: 1\n\n\r\n", b"0\r\n\r\n"]


@pytest.mark.parametrize("status", [204, 304])
async def test_an_answer_with_no_body_is_written_at_once_unframed(status: int) -> None:
    cycle, transport, _ = _cycle()
    await cycle.send(_start(status))
    assert len(transport.writes) == 1 and b"transfer-encoding" not in transport.writes[0]
    await cycle.send(_body(b""))
    assert len(transport.writes) == 1 and cycle.response_complete


async def test_an_answer_to_head_is_its_head_alone() -> None:
    cycle, transport, _ = _cycle("HEAD")
    await cycle.send(_start(200, (b"content-length", b"5")))
    await cycle.send(_body(b"hello"))
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 20:00:00 GMT\r\ncontent-length: 5\r\n\r\n"
    ]


@pytest.mark.parametrize(
    ("header", "which"),
    [
        ((b"x-a", b"one\r\nset-cookie: two"), "value"),
        ((b"x a", b"1"), "name"),
        ((b"x-a", b"\x00"), "value"),
        ((b"x-a: b\r\nset-cookie", b"two"), "name"),  # a whole line inside a name
        ((b"x-a:", b"1"), "name"),
        ((b"X-\x7f", b"1"), "name"),
        ((b"x-a", b"\x7f"), "value"),
    ],
    ids=[
        "crlf-in-value",
        "space-in-name",
        "nul-in-value",
        "line-in-name",
        "colon-in-name",
        "del-in-name",
        "del-in-value",
    ],
)
async def test_a_header_that_would_split_the_answer_is_refused(
    header: tuple[bytes, bytes], which: str
) -> None:
    for headers in ((header,), ((b"x-ok", b"fine"), header, (b"x-after", b"also fine"))):
        cycle, transport, _ = _cycle()
        with pytest.raises(RuntimeError, match=f"Invalid HTTP header {which}"):
            await cycle.send(_start(200, *headers, (b"content-length", b"0")))
        assert transport.writes == []


async def test_tabs_and_bytes_past_ascii_pass_as_uvicorn_lets_them() -> None:
    cycle, transport, _ = _cycle()
    await cycle.send(_start(200, (b"X-\xe9", b"a\tb \xff"), (b"content-length", b"0")))
    await cycle.send(_body(b""))
    assert b"\r\nx-\xe9: a\tb \xff\r\n" in transport.writes[0]


async def test_a_body_longer_or_shorter_than_its_length_is_refused() -> None:
    cycle, _, _ = _cycle()
    await cycle.send(_start(200, (b"content-length", b"2")))
    with pytest.raises(RuntimeError, match="longer"):
        await cycle.send(_body(b"abc"))
    cycle, _, _ = _cycle()
    await cycle.send(_start(200, (b"content-length", b"4")))
    with pytest.raises(RuntimeError, match="shorter"):
        await cycle.send(_body(b"ab"))


async def test_connection_close_ends_the_connection_after_the_answer() -> None:
    cycle, transport, _ = _cycle()
    await cycle.send(_start(200, (b"content-length", b"0"), (b"Connection", b"keep-alive, Close")))
    await cycle.send(_body(b""))
    assert transport.closed and not cycle.keep_alive
    cycle, transport, _ = _cycle(keep_alive=False)  # an HTTP/1.0 client, a draining server
    await cycle.send(_start(200, (b"content-length", b"0")))
    await cycle.send(_body(b""))
    assert b"connection: close\r\n" in transport.writes[0] and transport.closed


async def test_nothing_is_written_for_a_client_that_left() -> None:
    cycle, transport, _ = _cycle()
    await cycle.send(_start(200, (b"content-length", b"2")))
    cycle.disconnected = True
    await cycle.send(_body(b"{}"))
    assert transport.writes == []


async def test_a_hang_up_is_told_to_its_watcher_once_until_the_watch_ends() -> None:
    cycle, transport, _ = _cycle()
    told: list[str] = []
    flow = cycle.flow
    flow.pause_reading()
    cycle.watch_disconnect(lambda: told.append("left"))
    assert not flow.read_paused  # read again, as receive() does, so a hang-up is seen
    cycle.connection_lost()  # the connection closed after the answer: no hang-up
    assert told == []
    cycle.disconnected = True
    cycle.connection_lost()
    cycle.connection_lost()
    assert told == ["left"]
    cycle.watch_disconnect(None)
    cycle, _, _ = _cycle()
    cycle.watch_disconnect(lambda: told.append("again"))
    cycle.watch_disconnect(None)  # the watch ended first
    cycle.disconnected = True
    cycle.connection_lost()
    assert told == ["left"]
    cycle.watch_disconnect(lambda: told.append("at once"))  # it had already left
    assert told == ["left", "at once"]


async def test_a_message_out_of_turn_is_refused() -> None:
    cycle, _, _ = _cycle()
    with pytest.raises(RuntimeError, match="http.response.start"):
        await cycle.send(_body(b""))
    await cycle.send(_start(200, (b"content-length", b"0")))
    with pytest.raises(RuntimeError, match="http.response.body"):
        await cycle.send(_start(200))
    await cycle.send(_body(b""))
    with pytest.raises(RuntimeError, match="after response already completed"):
        await cycle.send(_body(b""))


# Over a real server, with the gateway's protocol.


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    if path == "/fail":
        raise RuntimeError("the app failed")
    if path == "/silent":
        return
    if path == "/stream":
        await send(_start(200, (b"content-type", b"text/event-stream")))
        await _RELEASE["stream"].wait()
        await send(_body(b"data: 1\n\n", more=True))
        await send(_body(b""))
        return
    answer = b"|".join(
        [
            scope["method"].encode(),
            scope["raw_path"],
            scope["query_string"],
            scope["client"][0].encode(),
            body,
        ]
    )
    await send(_start(200, (b"content-length", str(len(answer)).encode())))
    await send(_body(answer))


# The stream test's event, made in its own loop.
_RELEASE: dict[str, asyncio.Event] = {}


@contextlib.asynccontextmanager
async def _connection() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    # The options ft-gateway serve runs uvicorn with: the gateway's protocol among them.
    options = uvicorn_options(gateway_settings("http://127.0.0.1:9"))
    async with running_server(_app, lifespan="off", **options) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            yield reader, writer
        finally:
            writer.close()


async def _answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, await asyncio.wait_for(reader.readexactly(length), 10)


def _post(path: str, body: bytes, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: t", f"content-length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def test_requests_on_one_connection_and_pipelined_are_answered_in_order() -> None:
    async with _connection() as (reader, writer):
        writer.write(_post("/a%20b?x=1", b"one"))
        head, body = await _answer(reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and body == b"POST|/a%20b|x=1|127.0.0.1|one"
        writer.write(_post("/two", b"2") + _post("/three", b"3"))
        assert (await _answer(reader))[1].endswith(b"/two||127.0.0.1|2")
        assert (await _answer(reader))[1].endswith(b"/three||127.0.0.1|3")


async def test_a_claimed_address_does_not_replace_the_peers() -> None:
    async with _connection() as (reader, writer):
        writer.write(_post("/", b"", "x-forwarded-for: 203.0.113.9"))
        assert (await _answer(reader))[1] == b"POST|/||127.0.0.1|"


@pytest.mark.parametrize("path", ["/fail", "/silent"])
async def test_an_app_that_does_not_answer_gets_a_500_and_the_connection_closed(
    path: str,
) -> None:
    async with _connection() as (reader, writer):
        writer.write(_post(path, b""))
        head, body = await _answer(reader)
        assert head.startswith(b"HTTP/1.1 500 ") and body == b"Internal Server Error"
        assert b"connection: close" in head.lower()
        assert await asyncio.wait_for(reader.read(), 10) == b""


async def test_expect_100_continue_is_answered_before_the_body_is_read() -> None:
    async with _connection() as (reader, writer):
        writer.write(
            b"POST /e HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\nexpect: 100-continue\r\n\r\n"
        )
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"body")
        assert (await _answer(reader))[1] == b"POST|/e||127.0.0.1|body"


async def test_a_streams_head_reaches_the_client_before_its_first_event() -> None:
    release = _RELEASE["stream"] = asyncio.Event()
    async with _connection() as (reader, writer):
        writer.write(_post("/stream", b""))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert b"transfer-encoding: chunked" in head
        release.set()
        rest = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 10)
        assert rest == b"9\r\ndata: 1\n\n\r\n0\r\n\r\n"
