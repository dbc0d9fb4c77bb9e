"""Several engine replicas behind one UpstreamClient.

Each request goes to the replica with the fewest requests in flight (a request
is in flight until its response is closed, so a long stream counts for its
whole length); ties go round the ring. A replica whose connection fails
(UpstreamUnreachable: refused, or no answer to the connect) is taken out for
``eject_seconds`` and the request moves to another: nothing reached the
engine, so nothing can run twice. Any other failure comes back to the client
as it is, because the engine may already be generating. An ejected replica
returns once ``GET health_path`` answers without a 5xx; until then it is
probed again every ``eject_seconds``.

Every replica runs the same engine build, so a seeded request gives the same
tokens wherever it lands: there is no affinity to keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from gateway._types import Headers
from gateway.errors import GatewayError, UpstreamUnavailable, UpstreamUnreachable
from gateway.settings import Settings
from gateway.upstream.base import UpstreamClient, UpstreamResponse

logger = logging.getLogger("gateway")
_PROBE_BODY_LIMIT = 1 << 20


@dataclass(eq=False)
class Replica:
    """One engine replica and what the balancer knows about it."""

    url: str
    client: UpstreamClient
    in_flight: int = 0
    served: int = 0
    out_until: float | None = None  # loop time; None while in service
    reason: str = ""
    recovery: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def in_service(self) -> bool:
        return self.out_until is None


class _CountedResponse:
    """A replica's response that keeps its request in flight until closed."""

    def __init__(self, response: UpstreamResponse, replica: Replica) -> None:
        self._response = response
        self._replica: Replica | None = replica
        self.replica = replica.url  # which replica answered (recorded in traces)
        self.status = response.status
        self.headers = response.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.chunks()

    async def read(self, limit: int) -> bytes:
        return await self._response.read(limit)

    async def aclose(self) -> None:
        replica, self._replica = self._replica, None
        try:
            await self._response.aclose()
        finally:
            if replica is not None:
                replica.in_flight -= 1


class Balancer:
    """UpstreamClient that spreads requests over replicas, each with its own client."""

    def __init__(
        self,
        replicas: list[tuple[str, UpstreamClient]],
        *,
        eject_seconds: float,
        health_path: str = "/v1/models",
        health_timeout: float = 10.0,
        probe_headers: Headers | None = None,
    ) -> None:
        if not replicas:
            raise ValueError("a balancer needs at least one replica")
        self.replicas = [Replica(url, client) for url, client in replicas]
        self.eject_seconds = eject_seconds
        self.health_path = health_path
        self.health_timeout = health_timeout
        self.probe_headers: Headers = list(probe_headers or [])
        # Called with the replica after it goes out or comes back (logs, metrics, tests).
        self.listeners: list[Callable[[Replica], None]] = []
        self._next = 0
        self._closed = False

    @classmethod
    def from_settings(
        cls, settings: Settings, make_client: Callable[[Settings], UpstreamClient]
    ) -> Balancer:
        """One client per ``settings.upstream.replicas``, each made by ``make_client``
        from a copy of the settings that names that replica alone."""
        upstream = settings.upstream
        replicas = []
        for url in upstream.replicas:
            one = upstream.model_copy(update={"url": url, "urls": []})
            replicas.append((url, make_client(settings.model_copy(update={"upstream": one}))))
        key = settings.upstream_api_key()
        return cls(
            replicas,
            eject_seconds=upstream.eject_seconds,
            health_path=upstream.health_path,
            health_timeout=settings.timeouts.connect + 5.0,
            probe_headers=[(b"authorization", f"Bearer {key}".encode())] if key else [],
        )

    def _pick(self, tried: set[Replica]) -> Replica | None:
        count = len(self.replicas)
        best: tuple[int, int] | None = None
        for step in range(count):
            index = (self._next + step) % count
            replica = self.replicas[index]
            if replica.in_service and replica not in tried:
                if best is None or replica.in_flight < self.replicas[best[0]].in_flight:
                    best = (index, replica.in_flight)
        if best is None:
            return None
        self._next = (best[0] + 1) % count
        return self.replicas[best[0]]

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes
    ) -> UpstreamResponse:
        tried: set[Replica] = set()
        while True:
            replica = self._pick(tried)
            if replica is None:
                raise self._unavailable()
            tried.add(replica)
            replica.in_flight += 1
            try:
                response = await replica.client.request(method, path, headers=headers, body=body)
            except UpstreamUnreachable as exc:
                replica.in_flight -= 1
                self._eject(replica, exc.message)
                continue
            except BaseException:
                replica.in_flight -= 1
                raise
            replica.served += 1
            return _CountedResponse(response, replica)

    def _unavailable(self) -> UpstreamUnavailable:
        now = asyncio.get_running_loop().time()
        waits = [r.out_until - now for r in self.replicas if r.out_until is not None]
        retry = max(1, math.ceil(min(waits))) if waits else 1
        return UpstreamUnavailable(
            f"No engine replica is available: all {len(self.replicas)} failed to accept a "
            f"connection. Retry in {retry} s.",
            headers={"Retry-After": str(retry)},
        )

    def _eject(self, replica: Replica, reason: str) -> None:
        if not replica.in_service or self._closed:
            return
        replica.out_until = asyncio.get_running_loop().time() + self.eject_seconds
        replica.reason = reason
        logger.warning(
            "engine replica %s taken out for %g s: %s", replica.url, self.eject_seconds, reason
        )
        replica.recovery = asyncio.create_task(self._recover(replica))
        self._notify(replica)

    async def _recover(self, replica: Replica) -> None:
        loop = asyncio.get_running_loop()
        while replica.out_until is not None:
            await asyncio.sleep(max(0.0, replica.out_until - loop.time()))
            reason = await self._probe(replica)
            if reason is None:
                replica.out_until = None
                replica.reason = ""
                logger.warning("engine replica %s is back in service", replica.url)
                self._notify(replica)
                return
            replica.reason = reason
            replica.out_until = loop.time() + self.eject_seconds

    async def _probe(self, replica: Replica) -> str | None:
        """None if the replica answers its health check, else why not."""
        try:
            async with asyncio.timeout(self.health_timeout):
                response = await replica.client.request(
                    "GET", self.health_path, headers=list(self.probe_headers), body=b""
                )
                try:
                    await response.read(_PROBE_BODY_LIMIT)
                finally:
                    await response.aclose()
        except TimeoutError:
            return "health check timed out"
        except GatewayError as exc:
            return exc.message
        except Exception as exc:  # a probe must never die and leave the replica out for good
            logger.exception("health check of %s failed", replica.url, exc_info=exc)
            return f"health check failed: {exc!r}"
        if response.status >= 500:
            return f"health check answered HTTP {response.status}"
        return None

    def _notify(self, replica: Replica) -> None:
        for listener in self.listeners:
            listener(replica)

    async def aclose(self) -> None:
        self._closed = True
        tasks = [r.recovery for r in self.replicas if r.recovery is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for replica in self.replicas:
            await replica.client.aclose()
