"""How a route turns an engine's stream into the client's: the StreamShaper protocol."""

from __future__ import annotations

from typing import Any, Protocol

from gateway.errors import GatewayError
from gateway.limits.meter import Usage


class StreamShaper(Protocol):
    """One request's stream, engine chunks to client bytes (a route makes one per call)."""

    ended: bool  # the engine's stream reached its own end ([DONE], a final event)

    @property
    def usage(self) -> Usage | None:
        """What the engine reported, once it did."""
        ...

    def start(self) -> bytes:
        """What the client gets before the engine's first event (often nothing)."""
        ...

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        """What the client gets for whole engine events: their bytes as they came, their
        parsed data, and whether ``data: [DONE]`` closed them. The one place a stream
        chunk is shaped."""
        ...

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        """The tail of a stream that ended well, and a failure that came with it."""
        ...

    def fail(self, exc: GatewayError) -> bytes:
        """The bytes that end a stream broken by ``exc`` (the route's framing)."""
        ...
