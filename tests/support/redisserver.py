"""A real Redis server (Debian's ``redis-server``, installed by scripts/services) as the
test's own process on a free loopback port: no persistence, no other client.

``RedisServer`` can be stopped and started again on the same port, for tests of what the
gateway does while its Redis is gone.
"""

from __future__ import annotations

import signal
import socket

from tests.support.serverprocess import ServerProcess
from tests.support.servers import free_port


class RedisServer(ServerProcess):
    """``redis-server`` on 127.0.0.1:``port``; ``url`` is its ``redis://`` address."""

    binary = "redis-server"
    stop_signal = signal.SIGKILL  # as a crash would: its data is gone with it

    def __init__(self, port: int | None = None) -> None:
        super().__init__()
        self._movable = port is None
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def move(self) -> bool:
        # Only before it first served: a restarted server keeps the URL its clients know.
        if not self._movable:
            return False
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        return True

    def command(self, binary: str) -> list[str]:
        return [
            binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--daemonize", "no",
            "--loglevel", "warning",
        ]  # fmt: skip

    def ready(self) -> bool:
        ready = self._answers()
        if ready:
            self._movable = False
        return ready

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False
