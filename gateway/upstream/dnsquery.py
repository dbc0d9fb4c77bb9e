"""Asking one DNS server directly (``upstream.dns.nameserver``), through dnspython.

``getaddrinfo`` asks whatever /etc/resolv.conf names, always on port 53; a
named server on any port (a test's dnsmasq on loopback, a sidecar resolver)
needs a DNS client. dnspython's asyncio resolver is that client; it is
imported only when a nameserver is configured (discovery.py loads this
module by name). It keeps no cache, so every interval sees fresh records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import dns.asyncresolver
import dns.exception
import dns.resolver


def nameserver_resolver(nameserver: str) -> Callable[[str], Awaitable[list[str]]]:
    """A resolve function that asks ``nameserver`` (HOST, HOST:PORT or [IPv6]:PORT)."""
    host, port = _split(nameserver)
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = port
    resolver.lifetime = 3.0

    async def resolve(name: str) -> list[str]:
        addresses: list[str] = []
        for rdtype in ("A", "AAAA"):
            try:
                answer = await resolver.resolve(name, rdtype, search=False)
            except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
                continue
            except dns.exception.DNSException as exc:
                raise OSError(f"DNS server {nameserver}: {exc}") from exc
            addresses.extend(rdata.to_text() for rdata in answer)
        return addresses

    return resolve


def _split(nameserver: str) -> tuple[str, int]:
    if nameserver.startswith("["):
        host, _, rest = nameserver[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 53
    host, _, port = nameserver.partition(":")
    return host, int(port) if port else 53
