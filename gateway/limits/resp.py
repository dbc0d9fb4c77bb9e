"""One pipelined connection to Redis, for the limiter's scripts.

Every decision is one ``EVALSHA`` (one round trip). Rather than a pool of
connections, each used by one command at a time (redis-py's asyncio client),
all the decisions of a process share one connection: a command is written
the moment it is made and its reply future queued; Redis answers in order,
so each reply (parsed by hiredis, the C parser redis-py also uses) goes to
the oldest waiting future. Measured by ``python -m bench.cost limiter``: about half the
CPU per decision of redis-py, and one connection per process however many
requests are in flight. A caller that stops waiting (its time-out) leaves its
future in the queue, cancelled, so later replies still meet their callers;
after three time-outs in a row the connection is closed and the next command
opens a new one. Losing the connection fails every waiting command at once.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import hiredis

_MAX_TIMEOUTS = 3


class RedisCommandError(Exception):
    """Redis answered a command with an error (``-ERR ...``)."""


def pack(*parts: bytes | str | int) -> bytes:
    """One command in RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            reply = self.reader.gets()
            if reply is False:
                return
            future = self.waiting.popleft()
            if future.done():
                continue  # its caller timed out
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(RedisCommandError(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError("the connection to Redis was lost"))


class RedisConnection:
    """A lazily opened, pipelined connection to the Redis at ``url``
    (``redis://[[user]:password@]host[:port][/db]``, or ``rediss://`` for TLS)."""

    def __init__(self, url: str, *, connect_timeout: float) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        self.tls = parts.scheme == "rediss"
        self.user = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        path = parts.path.strip("/")
        self.db = int(path) if path else 0
        self.connect_timeout = connect_timeout
        self._protocol: _Protocol | None = None
        self._opening: asyncio.Task[_Protocol] | None = None
        self._timeouts = 0
        self.opened = 0  # connections opened so far (the soak counts them)

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if self.tls else None
        async with asyncio.timeout(self.connect_timeout):
            _, protocol = await loop.create_connection(_Protocol, self.host, self.port, ssl=context)
        self.opened += 1
        setup = []
        if self.password is not None:
            auth = [self.user, self.password] if self.user else [self.password]
            setup.append(pack("AUTH", *auth))
        if self.db:
            setup.append(pack("SELECT", self.db))
        for command in setup:
            await self._send(protocol, command)
        # Kept here, not only by a waiter: one whose call timed out while this opened
        # would otherwise leave it to no one, and the next call open another.
        self._protocol = protocol
        return protocol

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and not protocol.closed:
            return protocol
        if self._opening is None or self._opening.done():
            self._opening = asyncio.get_running_loop().create_task(self._open())
            # Its failure is its waiters' to report; retrieved here if none waits any more.
            self._opening.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            protocol = await asyncio.shield(self._opening)
        except BaseException:
            if self._opening.done():
                self._opening = None
            raise
        self._protocol = protocol
        return protocol

    @staticmethod
    def _send(protocol: _Protocol, command: bytes) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        protocol.waiting.append(future)
        assert protocol.transport is not None
        protocol.transport.write(command)
        return future

    async def call(self, command: bytes, *, timeout: float) -> Any:
        """Send one packed command and wait at most ``timeout`` seconds (connecting
        included) for its reply: TimeoutError, ConnectionError, OSError or
        RedisCommandError if none comes."""
        try:
            async with asyncio.timeout(timeout):
                protocol = await self._connected()
                reply = await self._send(protocol, command)
        except TimeoutError:
            self._timeouts += 1
            if self._timeouts >= _MAX_TIMEOUTS:
                self.close()
            raise
        self._timeouts = 0
        return reply

    def close(self) -> None:
        """Close the connection (the next command opens another)."""
        self._timeouts = 0
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
