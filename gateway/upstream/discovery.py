"""Replicas from DNS: resolve ``upstream.dns.name`` on an interval and follow its addresses.

A Kubernetes headless Service answers with one address per ready engine pod,
so the replica set follows the engine Deployment without a gateway restart.
Each resolution that returns addresses becomes the balancer's replica set
(``Balancer.update``: new ones join, gone ones drain). A resolution that fails
or comes back empty changes nothing: a DNS hiccup must not drain a healthy
fleet (a replica that really is gone is ejected on its first refused connect).

The system resolver (``getaddrinfo``, which honours /etc/resolv.conf and
/etc/hosts) is the default. ``nameserver`` asks one DNS server directly, on
any port, through dnspython (imported only then; see dnsquery.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

from gateway.background import in_background
from gateway.routing.config import Dns
from gateway.upstream.balancer import Balancer
from gateway.upstream.base import UpstreamClient

logger = logging.getLogger("gateway")
Resolve = Callable[[str], Awaitable[list[str]]]


async def system_resolve(name: str) -> list[str]:
    """Every address of ``name`` from the system resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def replica_url(address: str, *, scheme: str, port: int) -> str:
    """The base URL of the replica at ``address`` (IPv6 in brackets)."""
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return f"{scheme}://{host}:{port}"


class Discovery:
    """Resolves the name every ``interval`` seconds and hands the URLs to ``update``."""

    def __init__(
        self, dns: Dns, *, update: Callable[[list[str]], None], resolve: Resolve | None = None
    ) -> None:
        self.dns = dns
        self.update = update
        if resolve is None and dns.nameserver is not None:
            query = importlib.import_module("gateway.upstream.dnsquery")
            resolve = query.nameserver_resolver(dns.nameserver)
        self.resolve: Resolve = resolve or system_resolve
        self.last: list[str] = []

    async def once(self) -> list[str]:
        """Resolve now; the replica URLs, or [] (and nothing changed) if none came back."""
        dns = self.dns
        try:
            async with asyncio.timeout(max(dns.interval, 2.0)):
                addresses = await self.resolve(dns.name)
        except (OSError, TimeoutError, ValueError) as exc:
            logger.warning("DNS: cannot resolve %s: %s; replicas unchanged", dns.name, exc)
            return []
        urls = sorted(
            {replica_url(a, scheme=dns.scheme, port=dns.port) for a in addresses if _ip(a)}
        )
        if not urls:
            logger.warning("DNS: %s has no address; replicas unchanged", dns.name)
            return []
        if urls != self.last:
            logger.warning("DNS: %s is now %s", dns.name, ", ".join(urls))
            self.last = urls
        self.update(urls)
        return urls

    async def run(self) -> None:
        """Resolve forever, every ``interval`` seconds (cancel to stop)."""
        while True:
            await asyncio.sleep(self.dns.interval)
            await self.once()


def _ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


@contextlib.asynccontextmanager
async def discovering(upstream: UpstreamClient, dns: Dns | None) -> AsyncIterator[None]:
    """While open, keep ``upstream`` (a Balancer) on the addresses of ``dns`` (if set):
    one resolution before serving, then one every interval."""
    if dns is None or not isinstance(upstream, Balancer):
        yield
        return
    discovery = Discovery(dns, update=upstream.update)
    await discovery.once()
    async with in_background(discovery.run()):
        yield
