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
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import dns.exception
import dns.resolver

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


class Dnsmasq:
    """``dnsmasq`` on 127.0.0.1:``port``; ``nameserver`` is ``127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.port = free_udp_and_tcp_port()
        self.nameserver = f"127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="ft-dnsmasq-"))
        self.hosts = self._dir / "hosts"
        self.hosts.write_text(_READY_LINE)
        self._proc: subprocess.Popen[bytes] | None = None
        self._resolver = dns.resolver.Resolver(configure=False)
        self._resolver.nameservers = ["127.0.0.1"]
        self._resolver.port = self.port
        self._resolver.lifetime = 0.5

    def start(self) -> None:
        binary = shutil.which("dnsmasq")
        if binary is None:
            raise RuntimeError("dnsmasq is not installed: scripts/services installs it")
        self._proc = subprocess.Popen(
            [
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
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while self.lookup(_READY) != ["127.0.0.1"]:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise RuntimeError(f"dnsmasq exited: {err}")
            if time.monotonic() > deadline:
                raise RuntimeError("dnsmasq did not answer within 10 s")
            time.sleep(0.01)

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
        assert self._proc is not None
        self._proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while self.lookup(name) != sorted(addresses):
            if time.monotonic() > deadline:
                raise RuntimeError(f"dnsmasq did not take the new records of {name}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Dnsmasq:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _user() -> str:
    # As root, dnsmasq drops to "nobody", who could not read the hosts file in our
    # private temporary directory after SIGHUP: stay the user we are.
    return pwd.getpwuid(os.getuid()).pw_name
