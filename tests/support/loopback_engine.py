"""A scripted HTTP/1.1 engine on a loopback port, for tests of the upstream clients.

Each request on a connection is parsed and handed to the test's ``handler``,
which writes whatever it wants on the raw socket (a good answer, a truncated
one, garbage, nothing at all). The engine records every request and sets
``connection_closed`` when a client closes a connection, so tests can tell an
abandoned stream from a returned-to-the-pool connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class SeenRequest:
    """One request as it reached the engine (header names lower-cased)."""

    method: str
    target: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    connection: int

    def header(self, name: bytes) -> bytes | None:
        """The value of header ``name``, or None."""
        return next((v for n, v in self.headers if n == name), None)


class Wire:
    """The engine's side of one connection, as a handler sees it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait until the socket took it."""
        self._writer.write(data)
        await self._writer.drain()

    def hang_up(self) -> None:
        """Close the connection (after what was sent)."""
        self._writer.close()

    async def until_client_leaves(self) -> None:
        """Send nothing more; return when the client closes the connection."""
        with contextlib.suppress(ConnectionError):
            while await self._reader.read(65536):
                pass
        self._writer.close()


Handler = Callable[[SeenRequest, Wire], Awaitable[None]]


def http_response(
    status: int, body: bytes, *, headers: list[tuple[bytes, bytes]] | None = None
) -> bytes:
    """A whole HTTP/1.1 response with Content-Length."""
    head = [b"HTTP/1.1 %d X" % status, b"content-length: %d" % len(body)]
    head += [n + b": " + v for n, v in headers or []]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
LAST_CHUNK = b"0\r\n\r\n"


@dataclass
class LoopbackEngine:
    """The scripted engine; ``url`` once started."""

    handler: Handler
    requests: list[SeenRequest] = field(default_factory=list)
    connections: int = 0
    closed_connections: int = 0
    connection_closed: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        task = asyncio.current_task()
        assert task is not None  # always inside the server's task
        self._tasks.add(task)
        wire = Wire(reader, writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.rstrip(b"\r\n").split(b"\r\n")
                method, target, _ = lines[0].split(b" ", 2)
                headers = []
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    headers.append((name.strip().lower(), value.strip()))
                length = int(next((v for n, v in headers if n == b"content-length"), b"0"))
                body = await reader.readexactly(length) if length else b""
                seen = SeenRequest(method.decode(), target.decode(), headers, body, number)
                self.requests.append(seen)
                await self.handler(seen, wire)
                if writer.is_closing():
                    return
        except ConnectionError:
            return
        finally:
            self._tasks.discard(task)
            self.closed_connections += 1
            self.connection_closed.set()
            writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LoopbackEngine]:
        """Serve on a free loopback port until the block ends."""
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        try:
            yield self
        finally:
            server.close()
            # Handlers still waiting (on a test's event, on a client) end here.
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()


@contextlib.contextmanager
def unanswered_url() -> Iterator[str]:
    """A loopback URL whose listener never accepts and whose accept queue is full, so a
    new connect gets no SYN-ACK and hangs until the client's connect time-out."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def refused_url() -> str:
    """A loopback URL nothing listens on (connects are refused at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
