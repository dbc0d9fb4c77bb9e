"""Graceful shutdown: stop taking requests, let those in flight finish, then end them.

On SIGTERM (server.py) ``begin`` turns /readyz to 503 at once so a load
balancer stops sending, and new requests that still arrive (the port stays
open until the drain is over, so a probe gets its answer rather than a refused
connection) get 503 with Retry-After. Requests in flight carry on; when the
drain time-out passes, each is cancelled through what it registered with
``register`` (its Cutoff), and the proxy answers 503 if it had not started its response, or
ends the stream with an SSE error event if it had.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Cancellable(Protocol):
    """What a request registers: the drain calls ``cancel()`` when it expires."""

    def cancel(self) -> None: ...


class Drain:
    """Shutdown state shared by the endpoints."""

    def __init__(self) -> None:
        self.draining = False
        self.expired = False
        self._scopes: set[Cancellable] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._idle: asyncio.Event | None = None

    def begin(self, timeout: float) -> None:
        """Refuse new work from now on; end the work in flight after ``timeout`` seconds."""
        if self.draining:
            return
        self.draining = True
        self._idle = asyncio.Event()
        if not self._scopes:
            self._idle.set()
        self._timer = asyncio.get_running_loop().call_later(timeout, self.expire)

    async def finished(self) -> None:
        """Return once draining and no request is in flight any more."""
        if self._idle is None:
            raise RuntimeError("the drain has not begun")
        await self._idle.wait()

    def expire(self) -> None:
        """End every request still in flight."""
        self.expired = True
        for scope in list(self._scopes):
            scope.cancel()

    @property
    def in_flight(self) -> int:
        """Requests registered right now."""
        return len(self._scopes)

    def register(self, target: Cancellable) -> None:
        """Track ``target`` until ``unregister``; cancel it at once if the drain expired."""
        self._scopes.add(target)
        if self.expired:
            target.cancel()

    def unregister(self, target: Cancellable) -> None:
        """Stop tracking ``target``."""
        self._scopes.discard(target)
        if not self._scopes and self._idle is not None:
            self._idle.set()
