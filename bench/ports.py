"""A free TCP port on loopback, for every process the bench starts."""

from __future__ import annotations

import atexit
import socket

HOST = "127.0.0.1"


# The sockets of free_port(hold=True), bound (never listening) while this process lives.
_HELD: list[socket.socket] = []


@atexit.register
def _release() -> None:
    # Closed before the interpreter's teardown collects them, which warns of each one
    # (ResourceWarning: unclosed socket) as a pytest-xdist worker exits.
    while _HELD:
        _HELD.pop().close()


def free_port(*, hold: bool = False) -> int:
    """A TCP port on 127.0.0.1 that is free right now. ``hold=True``: and that no
    other process is given while this one lives: a socket of this process stays bound
    there, never listening (a connect is refused). A server this process starts that
    binds with SO_REUSEADDR (uvicorn, asyncio, redis-server, dnsmasq) may listen there,
    and again after it stopped; nginx, Envoy and the routers may not (hold=False)."""
    # Linux shares a port between SO_REUSEADDR sockets while none of them listens, and
    # never hands a bound port to a bind of port 0: the holder keeps out another
    # pytest-xdist worker's (or another suite's) servers, which would otherwise take
    # the port between the moment it is chosen and the moment a server listens there.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    port: int = sock.getsockname()[1]
    if hold:
        _HELD.append(sock)
    else:
        sock.close()
    return port
