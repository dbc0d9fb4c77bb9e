"""A real DNS server (Debian's ``dnsmasq``, installed by scripts/services) as the test's
own process on a free loopback port, answering from a hosts file the test rewrites.

``Dnsmasq.set(name, addresses)`` rewrites the file, sends SIGHUP (dnsmasq re-reads its
hosts files and clears its cache) and waits until the server answers with the new
addresses. Several 127.0.0.x addresses all reach this machine on Linux, so a test can
run one engine per address on one port.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import time

import dns.exception
import dns.resolver

from tests.support.serverprocess import ServerProcess
from tests.support.servers import free_port

DOMAIN = "ft-test"  # the names a test may set end in .ft-test
_READY = f"ready.{DOMAIN}"
_READY_LINE = f"127.0.0.1 {_READY}\n"


def free_udp_and_tcp_port() -> int:
    """A port free for both TCP and UDP on 127.0.0.1 (dnsmasq listens on both)."""
    while True:
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Dnsmasq(ServerProcess):
    """``dnsmasq`` on 127.0.0.1:``port``; ``nameserver`` is ``127.0.0.1:PORT``."""

    binary = "dnsmasq"

    def __init__(self) -> None:
        super().__init__()
        self.hosts = self.directory / "hosts"
        self.hosts.write_text(_READY_LINE)
        self._resolver = dns.resolver.Resolver(configure=False)
        self._resolver.nameservers = ["127.0.0.1"]
        self._resolver.lifetime = 0.5
        self._served = False
        self.move()

    def move(self) -> bool:
        # Only before it first served: the tests' resolvers know its port after.
        if self._served:
            return False
        self.port = free_udp_and_tcp_port()
        self.nameserver = f"127.0.0.1:{self.port}"
        self._resolver.port = self.port
        return True

    def command(self, binary: str) -> list[str]:
        return [
            binary,
            "--no-daemon",
            f"--port={self.port}",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            "--no-resolv",
            "--no-hosts",
            f"--local=/{DOMAIN}/",  # names there not in the file: NXDOMAIN, not REFUSED
            f"--addn-hosts={self.hosts}",
            "--pid-file=",
            "--user=" + _user(),
            "--local-ttl=0",
            "--log-facility=-",
            "--quiet-dhcp",
        ]

    def ready(self) -> bool:
        self._served = self._served or self.lookup(_READY) == ["127.0.0.1"]
        return self._served

    def lookup(self, name: str) -> list[str] | None:
        """The A records of ``name`` ([] for no such name), or None if no answer came."""
        try:
            answer = self._resolver.resolve(name, "A", search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException:
            return None
        return sorted(r.to_text() for r in answer)

    def set(self, name: str, addresses: list[str]) -> None:
        """Make ``name`` (under .ft-test) resolve to ``addresses`` (none: NXDOMAIN), and
        wait until it does."""
        self.hosts.write_text(_READY_LINE + "".join(f"{a} {name}\n" for a in addresses))
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while self.lookup(name) != sorted(addresses):
            if time.monotonic() > deadline:
                raise RuntimeError(f"dnsmasq did not take the new records of {name}")
            time.sleep(0.01)


def _user() -> str:
    # As root, dnsmasq drops to "nobody", who could not read the hosts file in our
    # private temporary directory after SIGHUP: stay the user we are.
    return pwd.getpwuid(os.getuid()).pw_name
