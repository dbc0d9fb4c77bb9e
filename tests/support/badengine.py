"""A misbehaving engine: a raw HTTP/1.1 server on loopback that fails on request.

Raw sockets rather than an ASGI app, because the failures that matter are
below HTTP frameworks: a reset connection, a garbage status line, a body that
never ends. The mode is picked per request by the ``x-bad-mode`` header (the
gateway passes custom headers on to the engine), tuned by ``x-bad-delay``
(seconds), ``x-bad-chunks``, ``x-bad-bytes``, ``x-bad-gate`` and
``x-bad-location``. Without a mode it is a fast, healthy OpenAI-style engine,
which is what the soak runs against (``python -m tests.support.badengine``).

Every request is recorded (``requests``) with its connection, and every
connection records when the gateway closed it (``Connection.closed_at``,
``perf_counter`` time), so tests can tell how soon a hang-up reached the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

MODES = (
    "ok",  # healthy: JSON, or an SSE stream when the body says "stream": true
    "close",  # reads the request, closes the connection without a word
    "hang",  # reads the request, never answers
    "slow",  # answers like "ok" after x-bad-delay seconds
    "html500",  # 500 with an HTML page full of internals
    "leak400",  # 400 whose message carries a traceback and an internal address
    "badjson",  # 200 application/json that is cut off
    "badsse",  # a good event, then one that is not JSON
    "cut",  # a good event, then the end of the body without [DONE]
    "reset",  # a good event, then a TCP reset
    "stall",  # a good event, then silence
    "huge",  # an answer that never ends (JSON, or events when streaming)
    "wrongtype",  # 200 text/plain
    "redirect",  # 307 to x-bad-location
    "garbage",  # not HTTP at all
    "notstream",  # JSON answer to a streaming request
)


@dataclass
class Connection:
    """One TCP connection from the gateway."""

    id: int
    opened_at: float
    closed_at: float | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Seen:
    """One request as it reached the engine (header names lower-cased)."""

    connection: Connection
    method: str
    target: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    at: float
    sent: int = 0  # body bytes written so far

    def header(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.headers if n == name), None)

    def json(self) -> Any:
        return json.loads(self.body)


class _Wire:
    """Bytes from one connection, pumped into a buffer so a hang-up is seen at once."""

    def __init__(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        self._reader = reader
        self._conn = conn
        self._buffer = bytearray()
        self._more = asyncio.Event()
        self.task = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        try:
            while data := await self._reader.read(65536):
                self._buffer += data
                self._more.set()
        except OSError:
            pass
        self._conn.closed_at = time.perf_counter()
        self._conn.closed.set()
        self._more.set()

    async def _wait(self) -> bool:
        if self._conn.closed.is_set():
            return False
        self._more.clear()
        await self._more.wait()
        return True

    async def read_until(self, mark: bytes, limit: int = 1 << 20) -> bytes | None:
        while (end := self._buffer.find(mark)) < 0:
            if len(self._buffer) > limit or not await self._wait():
                return None
        out = bytes(self._buffer[: end + len(mark)])
        del self._buffer[: end + len(mark)]
        return out

    async def read_exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not await self._wait():
                return None
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out


def _head(status: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{n}: {v}" for n, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _whole(status: str, body: bytes, content_type: str) -> bytes:
    head = [("content-type", content_type), ("content-length", str(len(body)))]
    return _head(status, head) + body


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def completion(model: str, content: str = "ok") -> dict[str, Any]:
    """A non-streaming chat completion."""
    return {
        "id": "chatcmpl-bad",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def sse_chunk(model: str, content: str) -> bytes:
    """One streamed chat completion chunk as an SSE event."""
    chunk = {
        "id": "chatcmpl-bad",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


STREAM_HEAD = _head(
    "200 OK", [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
)
DONE = b"data: [DONE]\n\n"
HTML_500 = (
    b"<html><body><h1>Internal Server Error</h1><pre>Traceback (most recent call last):\n"
    b'  File "/srv/engine/server.py", line 88, in generate\n'
    b"ConnectionError: scheduler at 10.12.0.7:7000 unreachable</pre></body></html>"
)


class BadEngine:
    """The engine; ``url`` once started (``async with BadEngine() as engine``)."""

    def __init__(self, *, port: int = 0) -> None:
        self.port = port
        self.requests: list[Seen] = []
        self.connections: list[Connection] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.arrived = asyncio.Condition()
        self.record = True
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def gate(self, name: str) -> asyncio.Event:
        """The event that a request with ``x-bad-gate: name`` waits for after its first event."""
        return self.gates.setdefault(name, asyncio.Event())

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, backlog=4096, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> BadEngine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def wait_for_request(self, request_id: str) -> Seen:
        """The request whose X-Request-ID is ``request_id``, once it has arrived."""
        async with self.arrived:
            await self.arrived.wait_for(lambda: self.find(request_id) is not None)
        seen = self.find(request_id)
        assert seen is not None
        return seen

    def find(self, request_id: str) -> Seen | None:
        key = request_id.encode()
        return next((r for r in self.requests if r.header(b"x-request-id") == key), None)

    @property
    def open_connections(self) -> int:
        return sum(1 for c in self.connections if not c.closed.is_set())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        conn = Connection(id=len(self.connections), opened_at=time.perf_counter())
        if self.record:
            self.connections.append(conn)
        wire = _Wire(reader, conn)
        try:
            while await self._one_request(wire, writer, conn):
                pass
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            wire.task.cancel()
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            self._handlers.discard(task)

    async def _one_request(
        self, wire: _Wire, writer: asyncio.StreamWriter, conn: Connection
    ) -> bool:
        head = await wire.read_until(b"\r\n\r\n")
        if head is None:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip().lower().encode(), value.strip().encode("latin-1")))
        seen = Seen(conn, method, target, headers, b"", time.perf_counter())
        length = seen.header(b"content-length")
        if length is not None:
            body = await wire.read_exactly(int(length))
            if body is None:
                return False
            seen.body = body
        elif seen.header(b"transfer-encoding") == b"chunked":
            parts = []
            while True:
                size_line = await wire.read_until(b"\r\n")
                if size_line is None:
                    return False
                size = int(size_line.split(b";")[0], 16)
                data = await wire.read_exactly(size + 2)
                if data is None:
                    return False
                if size == 0:
                    break
                parts.append(data[:-2])
            seen.body = b"".join(parts)
        if self.record:
            self.requests.append(seen)
            async with self.arrived:
                self.arrived.notify_all()
        answer = asyncio.ensure_future(self._answer(seen, writer))
        closed = asyncio.ensure_future(conn.closed.wait())
        try:
            await asyncio.wait({answer, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await answer
        return answer.done() and not answer.cancelled() and answer.result()

    async def _answer(self, seen: Seen, writer: asyncio.StreamWriter) -> bool:
        """Answer ``seen``; True to keep the connection for another request."""
        mode = (seen.header(b"x-bad-mode") or b"ok").decode()
        delay = float(seen.header(b"x-bad-delay") or b"0")
        try:
            body = json.loads(seen.body) if seen.body else {}
        except ValueError:
            body = {}
        stream = isinstance(body, dict) and body.get("stream") is True
        model = str(body.get("model", "m")) if isinstance(body, dict) else "m"

        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()
            seen.sent += len(data)

        if seen.target.startswith("/v1/models"):
            data = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})
            await write(_whole("200 OK", data.encode(), "application/json"))
            return True
        if mode == "slow":
            await asyncio.sleep(delay)
            mode = "ok"
        handler = _HANDLERS.get(mode, _ok)
        return await handler(self, seen, write, writer, stream=stream, model=model, delay=delay)


Write = Callable[[bytes], Awaitable[None]]


async def _ok(
    engine: BadEngine,
    seen: Seen,
    write: Write,
    writer: asyncio.StreamWriter,
    *,
    stream: bool,
    model: str,
    delay: float,
) -> bool:
    if not stream:
        data = json.dumps(completion(model)).encode()
        await write(_whole("200 OK", data, "application/json"))
        return True
    chunks = int(seen.header(b"x-bad-chunks") or b"3")
    pad = "x" * int(seen.header(b"x-bad-bytes") or b"0")
    gate = seen.header(b"x-bad-gate")
    await write(STREAM_HEAD)
    index = 0
    while chunks < 0 or index < chunks:
        await write(_chunk(sse_chunk(model, f"t{index}{pad}")))
        if index == 0 and gate is not None:
            await engine.gate(gate.decode()).wait()
        elif delay:
            await asyncio.sleep(delay)
        index += 1
    await write(_chunk(DONE) + b"0\r\n\r\n")
    return True


async def _first_event(write: Write, model: str) -> None:
    await write(STREAM_HEAD + _chunk(sse_chunk(model, "t0")))


async def _failing(
    engine: BadEngine,
    seen: Seen,
    write: Write,
    writer: asyncio.StreamWriter,
    *,
    stream: bool,
    model: str,
    delay: float,
) -> bool:
    mode = (seen.header(b"x-bad-mode") or b"").decode()
    forever = asyncio.Event()  # never set: wait until the gateway hangs up
    if mode == "close":
        return False
    if mode == "hang":
        await forever.wait()
    if mode == "html500":
        await write(_whole("500 Internal Server Error", HTML_500, "text/html"))
        return True
    if mode == "leak400":
        error = {"message": HTML_500.decode(), "type": "BadRequestError", "code": 400}
        await write(
            _whole("400 Bad Request", json.dumps({"error": error}).encode(), "application/json")
        )
        return True
    if mode == "badjson":
        await write(
            _whole("200 OK", b'{"id": "chatcmpl-bad", "choices": [{"mess', "application/json")
        )
        return True
    if mode == "wrongtype":
        await write(_whole("200 OK", b"hello from the engine", "text/plain"))
        return True
    if mode == "notstream":
        await write(_whole("200 OK", json.dumps(completion(model)).encode(), "application/json"))
        return True
    if mode == "redirect":
        location = (seen.header(b"x-bad-location") or b"http://127.0.0.1:9/").decode()
        await write(
            _head("307 Temporary Redirect", [("location", location), ("content-length", "0")])
        )
        return True
    if mode == "garbage":
        await write(b"HTTP/1.1 banana\r\n\x00\x01\x02\r\n\r\n")
        return False
    if mode == "huge":
        block = b"x" * 65536
        if stream:
            await write(STREAM_HEAD)
            event = _chunk(sse_chunk(model, "y" * 4000))
            while True:
                await write(event)
        await write(
            _head(
                "200 OK", [("content-type", "application/json"), ("content-length", str(1 << 40))]
            )
        )
        await write(b'{"pad": "')
        while True:
            await write(block)
    await _first_event(write, model)
    if mode == "badsse":
        await write(_chunk(b"data: {not json at all\n\n") + _chunk(DONE) + b"0\r\n\r\n")
        return True
    if mode == "cut":
        await write(b"0\r\n\r\n")
        return True
    if mode == "reset":
        sock: socket.socket = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return False
    if mode == "stall":
        await forever.wait()
    raise ValueError(f"unknown x-bad-mode {mode!r}")


class _Handler(Protocol):
    async def __call__(
        self,
        engine: BadEngine,
        seen: Seen,
        write: Write,
        writer: asyncio.StreamWriter,
        *,
        stream: bool,
        model: str,
        delay: float,
    ) -> bool: ...


_HANDLERS: dict[str, _Handler] = {mode: _failing for mode in MODES if mode not in ("ok", "slow")}


async def _main(port: int) -> None:
    engine = BadEngine(port=port)
    engine.record = False  # a long soak must not grow the engine's memory
    await engine.start()
    print(engine.port, flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.support.badengine [--port P]``: serve until killed; prints the port."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.run(_main(args.port))
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(_main(args.port))


if __name__ == "__main__":
    main()
