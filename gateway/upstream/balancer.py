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
tokens wherever it lands. What differs is the engine's prefix cache: with
``upstream.routing: affinity`` a request with an affinity key (gateway/routing/)
goes to its key's replica on a consistent-hash ring unless that replica is
over the load bound. With ``upstream.max_in_flight`` no replica gets more than
that many generation requests (POST) at once; the others wait in the
gateway's queue (routing/queue.py). With ``upstream.dns`` the replica set
follows a DNS name: ``update`` adds new addresses and drains removed ones (no
new requests; those in flight finish, then the replica's client is closed).
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
from gateway.observe.routingmetrics import RoutingTallies
from gateway.routing.hint import NO_HINT, Hint
from gateway.routing.pickers import bounded_affinity, least_in_flight
from gateway.routing.queue import AdmissionQueue
from gateway.routing.ring import Ring
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
    draining: bool = False  # gone from DNS: no new requests
    reason: str = ""
    recovery: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def in_service(self) -> bool:
        return self.out_until is None


class _CountedResponse:
    """A replica's response that keeps its request in flight until closed."""

    def __init__(
        self, response: UpstreamResponse, replica: Replica, release: Callable[[Replica], None]
    ) -> None:
        self._response = response
        self._replica: Replica | None = replica
        self._release = release
        self.replica = replica.url  # which replica answered (recorded in traces)
        self.status = response.status
        self.headers = response.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.chunks()

    async def read(self, limit: int) -> bytes:
        return await self._response.read(limit)

    def finish(self) -> None:
        self._response.finish()

    async def aclose(self) -> None:
        replica, self._replica = self._replica, None
        try:
            await self._response.aclose()
        finally:
            if replica is not None:
                self._release(replica)


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
        routing: str = "least_in_flight",
        load_factor: float = 1.25,
        max_in_flight: int | None = None,
        queue_size: int = 1024,
        queue_timeout: float = 30.0,
        make_client: Callable[[str], UpstreamClient] | None = None,
    ) -> None:
        if not replicas and make_client is None:
            raise ValueError("a balancer needs at least one replica")
        self.replicas = [Replica(url, client) for url, client in replicas]
        self.eject_seconds = eject_seconds
        self.health_path = health_path
        self.health_timeout = health_timeout
        self.probe_headers: Headers = list(probe_headers or [])
        self.affinity = routing == "affinity"
        self.load_factor = load_factor
        self.max_in_flight = max_in_flight
        self.tallies = RoutingTallies()
        self.queue: AdmissionQueue[Replica] = AdmissionQueue(
            size=queue_size,
            timeout=queue_timeout,
            give_back=self._release,
            on_wait=self.tallies.wait,
            on_shed=self.tallies.shed_one,
        )
        # Makes the client of a replica that DNS adds (None: the list is fixed).
        self.make_client = make_client
        # Called with the replica after it goes out or comes back (logs, metrics, tests).
        self.listeners: list[Callable[[Replica], None]] = []
        self._next = 0
        self._closed = False
        self._closing: set[asyncio.Task[None]] = set()
        self._ring: Ring[Replica] = self._build_ring()

    @classmethod
    def from_settings(
        cls, settings: Settings, make_client: Callable[[Settings], UpstreamClient]
    ) -> Balancer:
        """One client per ``settings.upstream.replicas`` (none with ``upstream.dns``: the
        discovery adds them), each made by ``make_client`` from a copy of the settings
        that names that replica alone."""
        upstream = settings.upstream

        def one(url: str) -> UpstreamClient:
            alone = upstream.model_copy(
                update={"url": url, "urls": [], "dns": None, "max_in_flight": None}
            )
            return make_client(settings.model_copy(update={"upstream": alone}))

        urls = [] if upstream.dns is not None else upstream.replicas
        key = settings.upstream_api_key()
        return cls(
            [(url, one(url)) for url in urls],
            eject_seconds=upstream.eject_seconds,
            health_path=upstream.health_path,
            health_timeout=settings.timeouts.connect + 5.0,
            probe_headers=[(b"authorization", f"Bearer {key}".encode())] if key else [],
            routing=upstream.routing,
            load_factor=upstream.affinity.load_factor,
            max_in_flight=upstream.max_in_flight,
            queue_size=upstream.queue.size,
            queue_timeout=upstream.queue.timeout,
            make_client=one if upstream.dns is not None else None,
        )

    def _build_ring(self) -> Ring[Replica]:
        members = [r for r in self.replicas if not r.draining] if self.affinity else []
        return Ring(members, name=lambda r: r.url)

    def _place(self, hint: Hint, tried: set[Replica], cap: int | None) -> Replica | None:
        """The replica for a request, counted in flight there; None if none may take it."""
        if self.affinity and hint.source is not None:
            found = bounded_affinity(
                self._ring, hint.key, tried=tried, cap=cap, load_factor=self.load_factor
            )
            if found is None:
                return None
            replica, placement = found[0], "spilled" if found[1] else "home"
        else:
            index = least_in_flight(self.replicas, start=self._next, tried=tried, cap=cap)
            if index is None:
                return None
            self._next = (index + 1) % len(self.replicas)
            replica, placement = self.replicas[index], "least_in_flight"
        key = (hint.source or "none", placement)
        placements = self.tallies.placements
        placements[key] = placements.get(key, 0) + 1
        replica.in_flight += 1
        return replica

    def _release(self, replica: Replica) -> None:
        replica.in_flight -= 1
        if replica.draining:
            if replica.in_flight == 0:
                self._remove(replica)
        elif self.queue:
            self._offer()

    def _offer(self) -> None:
        self.queue.offer(lambda hint, tried: self._place(hint, tried, self.max_in_flight))

    def _usable(self, tried: set[Replica]) -> bool:
        return any(r.in_service and not r.draining and r not in tried for r in self.replicas)

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        # Only generation counts against the limit: not model lists or health checks.
        cap = self.max_in_flight if method == "POST" else None
        tried: set[Replica] = set()
        while True:
            # Queued requests go first: a newcomer waits behind them.
            replica = None if cap is not None and self.queue else self._place(hint, tried, cap)
            if replica is None:
                if cap is None or not self._usable(tried):
                    raise self._unavailable()
                replica = await self.queue.wait(hint, tried)
            tried.add(replica)
            try:
                response = await replica.client.request(method, path, headers=headers, body=body)
            except UpstreamUnreachable as exc:
                # Out first, so the slot freed here is not offered to a queued request.
                self._eject(replica, exc.message)
                self._release(replica)
                continue
            except BaseException:
                self._release(replica)
                raise
            replica.served += 1
            served = self.tallies.replica_requests
            served[replica.url] = served.get(replica.url, 0) + 1
            return _CountedResponse(response, replica, self._release)

    def _unavailable(self) -> UpstreamUnavailable:
        if not self.replicas:
            return UpstreamUnavailable(
                "No engine replica is known yet: the DNS name has not resolved to any "
                "address. Retry in 1 s.",
                headers={"Retry-After": "1"},
            )
        now = asyncio.get_running_loop().time()
        waits = [r.out_until - now for r in self.replicas if r.out_until is not None]
        retry = max(1, math.ceil(min(waits))) if waits else 1
        return UpstreamUnavailable(
            f"No engine replica is available: all {len(self.replicas)} failed to accept a "
            f"connection. Retry in {retry} s.",
            headers={"Retry-After": str(retry)},
        )

    def _eject(self, replica: Replica, reason: str) -> None:
        if not replica.in_service or self._closed or replica not in self.replicas:
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
                if self.queue:
                    self._offer()
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

    def update(self, urls: list[str]) -> None:
        """Make the replica set ``urls`` (DNS changed): add the new ones, drain the gone."""
        if self.make_client is None or self._closed:
            return
        wanted = dict.fromkeys(urls)
        known = {r.url: r for r in self.replicas}
        for url in wanted:
            replica = known.get(url)
            if replica is None:
                self.replicas.append(Replica(url, self.make_client(url)))
                logger.warning("engine replica %s added (DNS)", url)
            elif replica.draining:
                replica.draining = False
                logger.warning("engine replica %s is back in DNS: no longer draining", url)
        for replica in list(self.replicas):
            if replica.url not in wanted and not replica.draining:
                replica.draining = True
                logger.warning(
                    "engine replica %s left DNS: draining (%d in flight)",
                    replica.url,
                    replica.in_flight,
                )
                if replica.in_flight == 0:
                    self._remove(replica)
        self._ring = self._build_ring()
        if self.queue:
            self._offer()

    def _remove(self, replica: Replica) -> None:
        self.replicas.remove(replica)
        self._next = 0
        if replica.recovery is not None:
            replica.recovery.cancel()
        task = asyncio.get_running_loop().create_task(replica.client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        logger.warning("engine replica %s removed", replica.url)

    def gauges(self, tallies: RoutingTallies) -> None:
        """Fill the routing gauges of ``tallies`` (read when /metrics is scraped)."""
        tallies.queue_depth = self.queue.depth()
        tallies.replica_in_flight = {r.url: r.in_flight for r in self.replicas}
        states = {"in_service": 0, "ejected": 0, "draining": 0}
        for r in self.replicas:
            states["draining" if r.draining else "in_service" if r.in_service else "ejected"] += 1
        tallies.replicas = states

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
        for closing in list(self._closing):
            await closing
