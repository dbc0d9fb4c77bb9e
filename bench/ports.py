"""A free TCP port on loopback, for every process the bench starts."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port
