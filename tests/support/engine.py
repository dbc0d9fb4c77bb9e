"""A fake engine: a raw HTTP/1.1 server on a loopback port, healthy or failing on request.

Raw sockets rather than an ASGI app, because the failures that matter are below HTTP
frameworks: a reset connection, a garbage status line, a body that never ends.

Each request is parsed and handed to the engine's handler, ``handler(request, wire)``,
which writes what it wants (``wire.send``), hangs up (``wire.hang_up``, ``wire.reset``) or
waits for the client to leave (``wire.until_client_leaves``). A test passes a handler to
script an exchange. Without one the engine is ``FakeEngine.misbehave``: a fast, healthy
OpenAI-style engine unless the request's ``x-bad-mode`` header names a failure (the gateway
passes custom headers on to the engine), tuned by ``x-bad-delay`` (seconds),
``x-bad-chunks``, ``x-bad-bytes``, ``x-bad-gate`` and ``x-bad-location``. That is what the
soak runs against (``python -m tests.support.engine``).

Every request is recorded (``requests``) with its connection, and every connection when it
closed (``Connection.closed_at``, ``perf_counter``), so tests tell how soon a hang-up reached
the engine. Standard library only: the root conftest's plugin imports it.
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
from typing import Any

from tests.support.bodies import DONE, MODEL, chunk_event, completion
from tests.support.httpbytes import JSON as JSON
from tests.support.httpbytes import LAST_CHUNK as LAST_CHUNK
from tests.support.httpbytes import STREAM_HEAD as STREAM_HEAD
from tests.support.httpbytes import chunk as chunk
from tests.support.httpbytes import http_head as http_head
from tests.support.httpbytes import http_response as http_response
from tests.support.httpbytes import stream_end as stream_end
from tests.support.httpbytes import stream_start as stream_start
from tests.support.requestids import engine_id

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
HTML_500 = (
    b"<html><body><h1>Internal Server Error</h1><pre>Traceback (most recent call last):\n"
    b'  File "/srv/engine/server.py", line 88, in generate\n'
    b"ConnectionError: scheduler at 10.12.0.7:7000 unreachable</pre></body></html>"
)


@dataclass
class Connection:
    """One TCP connection to the engine."""

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
    sent: int = 0  # bytes of the answer written so far

    def header(self, name: bytes) -> bytes | None:
        """The value of header ``name``, or None."""
        return next((v for n, v in self.headers if n == name), None)

    def json(self) -> Any:
        return json.loads(self.body)


class Wire:
    """The engine's side of one connection. What the client sends is pumped into a
    buffer as it comes, so that the client hanging up is seen at once."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: Connection,
        on_close: Callable[[], None],
    ) -> None:
        self.connection = connection
        self.request: Seen | None = None  # the one being answered
        self._reader = reader
        self._writer = writer
        self._on_close = on_close
        self._buffer = bytearray()
        self._more = asyncio.Event()
        self._pumping = asyncio.ensure_future(self._pump())

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait until the socket took it."""
        self._writer.write(data)
        await self._writer.drain()
        if self.request is not None:
            self.request.sent += len(data)

    def hang_up(self) -> None:
        """Close the connection (after what was sent)."""
        self._writer.close()

    def reset(self) -> None:
        """Close the connection with a TCP reset."""
        sock: socket.socket = self._writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._writer.transport.abort()

    async def until_client_leaves(self) -> None:
        """Send nothing more; return when the client has closed the connection."""
        await self.connection.closed.wait()

    @property
    def open(self) -> bool:
        return not self._writer.is_closing() and not self.connection.closed.is_set()

    @property
    def unread(self) -> int:
        """Bytes the client sent that no request has been read from yet."""
        return len(self._buffer)

    async def until_input(self) -> bool:
        """Return once the client has sent bytes not read yet (True) or has left (False)."""
        while not self._buffer:
            if not await self._wait():
                return False
        return True

    async def _pump(self) -> None:
        try:
            while data := await self._reader.read(65536):
                self._buffer += data
                self._more.set()
        except OSError:
            pass
        self._mark_closed()
        self._more.set()

    def _mark_closed(self) -> None:
        """Record that the connection is closed (by either side), once."""
        if not self.connection.closed.is_set():
            self.connection.closed_at = time.perf_counter()
            self.connection.closed.set()
            self._on_close()

    async def _wait(self) -> bool:
        if self.connection.closed.is_set():
            return False
        self._more.clear()
        await self._more.wait()
        return True

    async def _read_until(self, mark: bytes, limit: int = 1 << 20) -> bytes | None:
        while (end := self._buffer.find(mark)) < 0:
            if len(self._buffer) > limit or not await self._wait():
                return None
        out = bytes(self._buffer[: end + len(mark)])
        del self._buffer[: end + len(mark)]
        return out

    async def _read_exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not await self._wait():
                return None
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out


Handler = Callable[[Seen, Wire], Awaitable[None]]


def sends(data: bytes, *, then_hang_up: bool = False) -> Handler:
    """A handler that answers every request with ``data`` (raw bytes), then hangs up if told."""

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(data)
        if then_hang_up:
            wire.hang_up()

    return handler


def sends_json(payload: Any, status: int = 200) -> Handler:
    """A handler that answers every request with ``payload`` as a JSON body."""
    return sends(http_response(status, json.dumps(payload).encode(), headers=JSON))


def sends_when(first: bytes, rest: bytes, go: asyncio.Event) -> Handler:
    """A handler that sends ``first`` (raw bytes), then ``rest`` once ``go`` is set."""

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(first)
        await go.wait()
        await wire.send(rest)

    return handler


def stalls_after(data: bytes = b"") -> Handler:
    """A handler that sends ``data`` (raw bytes), then nothing more until the client leaves."""

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(data)
        await wire.until_client_leaves()

    return handler


class FakeEngine:
    """The engine; ``url`` once started (``async with FakeEngine() as engine``)."""

    def __init__(self, handler: Handler | None = None, *, port: int = 0) -> None:
        self.handler: Handler = handler or self.misbehave
        self.port = port
        self.requests: list[Seen] = []
        # What it answers the gateway's own GET /v1/models with: the names tests send.
        self.models = ["m", MODEL]
        self.connections: list[Connection] = []
        self.connection_closed = asyncio.Event()  # set when any connection closes
        self.gates: dict[str, asyncio.Event] = {}
        self.arrived = asyncio.Condition()
        self.record = True
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def closed_connections(self) -> int:
        return sum(1 for c in self.connections if c.closed.is_set())

    def gate(self, name: str) -> asyncio.Event:
        """The event that a stream with ``x-bad-gate: name`` waits for after its first event."""
        return self.gates.setdefault(name, asyncio.Event())

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, backlog=4096, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        # Handlers still waiting (on a test's event, on a client) end here.
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> FakeEngine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def wait_for_request(self, request_id: str) -> Seen:
        """The request whose X-Request-ID is ``request_id`` (or what the gateway sends an
        engine for it), once it has arrived."""
        async with self.arrived:
            await self.arrived.wait_for(lambda: self.find(request_id) is not None)
        seen = self.find(request_id)
        assert seen is not None
        return seen

    def find(self, request_id: str) -> Seen | None:
        keys = {request_id.encode(), engine_id(request_id).encode()}
        return next((r for r in self.requests if r.header(b"x-request-id") in keys), None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # always inside the server's task
        self._handlers.add(task)
        connection = Connection(id=len(self.connections), opened_at=time.perf_counter())
        if self.record:
            self.connections.append(connection)
        wire = Wire(reader, writer, connection, self.connection_closed.set)
        try:
            while await self._one_request(wire):
                pass
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            wire._pumping.cancel()
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            wire._mark_closed()
            self._handlers.discard(task)

    async def _one_request(self, wire: Wire) -> bool:
        """Read one request and answer it; True to keep the connection for another."""
        head = await wire._read_until(b"\r\n\r\n")
        if head is None:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip().lower().encode(), value.strip().encode("latin-1")))
        seen = Seen(wire.connection, method, target, headers, b"", time.perf_counter())
        length = seen.header(b"content-length")
        if length is not None:
            body = await wire._read_exactly(int(length))
            if body is None:
                return False
            seen.body = body
        elif seen.header(b"transfer-encoding") == b"chunked":
            parts = []
            while True:
                size_line = await wire._read_until(b"\r\n")
                if size_line is None:
                    return False
                size = int(size_line.split(b";")[0], 16)
                data = await wire._read_exactly(size + 2)
                if data is None:
                    return False
                if size == 0:
                    break
                parts.append(data[:-2])
            seen.body = b"".join(parts)
        if (seen.header(b"user-agent") or b"").startswith(b"ft-gateway/"):
            # The gateway's own reading of the model list (gateway/fleet/served.py): not a
            # client's request, so neither recorded nor given to a test's handler.
            listed = [{"id": name, "object": "model"} for name in self.models]
            body = json.dumps({"object": "list", "data": listed}).encode()
            await wire.send(http_response(200, body, headers=JSON))
            return True
        if self.record:
            self.requests.append(seen)
            async with self.arrived:
                self.arrived.notify_all()
        wire.request = seen
        # The client leaving ends the answer, as it ends a real engine's request.
        answer = asyncio.ensure_future(self.handler(seen, wire))
        closed = asyncio.ensure_future(wire.connection.closed.wait())
        try:
            await asyncio.wait({answer, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await answer
        if answer.cancelled():
            return False
        answer.result()
        return wire.open

    async def misbehave(self, request: Seen, wire: Wire) -> None:
        """Healthy, unless the request's ``x-bad-mode`` names one of ``MODES``."""
        mode = (request.header(b"x-bad-mode") or b"ok").decode()
        delay = float(request.header(b"x-bad-delay") or b"0")
        try:
            body = json.loads(request.body) if request.body else {}
        except ValueError:
            body = {}
        stream = isinstance(body, dict) and body.get("stream") is True
        model = str(body.get("model", "m")) if isinstance(body, dict) else "m"
        if request.target.startswith("/v1/models"):
            models = {"object": "list", "data": [{"id": n, "object": "model"} for n in self.models]}
            await wire.send(http_response(200, json.dumps(models).encode(), headers=JSON))
            return
        if mode == "slow":
            await asyncio.sleep(delay)
            mode = "ok"
        if mode in MODES and mode != "ok":
            await _fail(mode, request, wire, stream=stream, model=model)
        elif stream:
            await self._stream(request, wire, model=model, delay=delay)
        else:
            answer = json.dumps(completion("ok", model=model)).encode()
            await wire.send(http_response(200, answer, headers=JSON))

    async def _stream(self, request: Seen, wire: Wire, *, model: str, delay: float) -> None:
        chunks = int(request.header(b"x-bad-chunks") or b"3")  # below 0: endless
        pad = "x" * int(request.header(b"x-bad-bytes") or b"0")
        gate = request.header(b"x-bad-gate")
        await wire.send(STREAM_HEAD)
        index = 0
        while chunks < 0 or index < chunks:
            await wire.send(chunk(chunk_event(f"t{index}{pad}", model=model)))
            if index == 0 and gate is not None:
                await self.gate(gate.decode()).wait()
            elif delay:
                await asyncio.sleep(delay)
            index += 1
        await wire.send(chunk(DONE) + LAST_CHUNK)


async def _fail(mode: str, request: Seen, wire: Wire, *, stream: bool, model: str) -> None:
    """Answer as failure ``mode`` does (see MODES)."""
    if mode == "close":
        wire.hang_up()
    elif mode == "hang":
        await wire.until_client_leaves()
    elif mode == "html500":
        await wire.send(http_response(500, HTML_500, headers=[(b"content-type", b"text/html")]))
    elif mode == "leak400":
        error = {"message": HTML_500.decode(), "type": "BadRequestError", "code": 400}
        await wire.send(http_response(400, json.dumps({"error": error}).encode(), headers=JSON))
    elif mode == "badjson":
        await wire.send(
            http_response(200, b'{"id": "chatcmpl-bad", "choices": [{"mess', headers=JSON)
        )
    elif mode == "wrongtype":
        plain = [(b"content-type", b"text/plain")]
        await wire.send(http_response(200, b"hello from the engine", headers=plain))
    elif mode == "notstream":
        answer = json.dumps(completion("ok", model=model)).encode()
        await wire.send(http_response(200, answer, headers=JSON))
    elif mode == "redirect":
        location = request.header(b"x-bad-location") or b"http://127.0.0.1:9/"
        await wire.send(http_response(307, b"", headers=[(b"location", location)]))
    elif mode == "garbage":
        await wire.send(b"HTTP/1.1 banana\r\n\x00\x01\x02\r\n\r\n")
        wire.hang_up()
    elif mode == "huge":
        if stream:
            await wire.send(STREAM_HEAD)
            event = chunk(chunk_event("y" * 4000, model=model))
            while True:
                await wire.send(event)
        length = [(b"content-length", b"%d" % (1 << 40))]
        await wire.send(http_head(200, [*JSON, *length]) + b'{"pad": "')
        block = b"x" * 65536
        while True:
            await wire.send(block)
    else:  # a good event first
        await wire.send(STREAM_HEAD + chunk(chunk_event("t0", model=model)))
        if mode == "badsse":
            await wire.send(chunk(b"data: {not json at all\n\n") + chunk(DONE) + LAST_CHUNK)
        elif mode == "cut":
            await wire.send(LAST_CHUNK)
        elif mode == "reset":
            wire.reset()
        elif mode == "stall":
            await wire.until_client_leaves()
        else:
            raise ValueError(f"unknown x-bad-mode {mode!r}")


async def _main(port: int) -> None:
    engine = FakeEngine(port=port)
    engine.record = False  # a long soak must not grow the engine's memory
    await engine.start()
    print(engine.port, flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.support.engine [--port P]``: serve until killed; prints the port."""
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
