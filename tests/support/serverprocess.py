"""A server binary (from a Debian package scripts/services installs) run as the test's own
process: started and waited on until it answers, stopped, and its scratch directory
removed when the ``with`` block ends. ``RedisServer`` and ``Dnsmasq`` are two.

Imports only the standard library (the shared fixtures plugin may import it).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self


class ServerProcess:
    """Subclasses name the ``binary``, give its ``command`` and say when it is ``ready``."""

    binary = ""
    # How ``stop`` ends it (SIGKILL: as a crash would, its data gone with it).
    stop_signal = signal.SIGTERM

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix=f"ft-{self.binary}-"))
        self.process: subprocess.Popen[bytes] | None = None

    def command(self, binary: str) -> list[str]:
        """The command line that runs the server in the foreground."""
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the server answers."""
        raise NotImplementedError

    def move(self) -> bool:
        """Take another free port, where the server may (its first start): True if it did.
        The port was free when chosen, but another process (a pytest-xdist worker, another
        suite) may have bound it before the server did."""
        return False

    def start(self) -> None:
        binary = shutil.which(self.binary)
        if binary is None:
            raise RuntimeError(f"{self.binary} is not installed: scripts/services installs it")
        for _ in range(5):
            err = self._run(binary)
            if err is None:
                return
            if "already in use" not in err or not self.move():
                raise RuntimeError(f"{self.binary} exited: {err}")
        raise RuntimeError(f"{self.binary} found no free port: {err}")

    def _run(self, binary: str) -> str | None:
        """Start the server and wait until it answers (None), or until it exits (its
        output, the process gone)."""
        # One pipe for both: redis-server logs to stdout, dnsmasq to stderr. Only the
        # warnings of a server that fails to start are there (nothing else is logged).
        self.process = subprocess.Popen(
            self.command(binary), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10
        # Whether it still runs is asked first: a server that could not bind its port
        # exits, and what answers there is another process's.
        while self.process.poll() is None:
            if self.ready():
                return None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.binary} did not answer within 10 s")
            time.sleep(0.01)
        err = self.process.stdout.read().decode() if self.process.stdout else ""
        self.stop()
        return err

    def stop(self) -> None:
        """End the server (``stop_signal``); ``start`` may run it again."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            self.process.wait(timeout=10)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
