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

    def start(self) -> None:
        binary = shutil.which(self.binary)
        if binary is None:
            raise RuntimeError(f"{self.binary} is not installed: scripts/services installs it")
        self.process = subprocess.Popen(
            self.command(binary), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 10
        while not self.ready():
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"{self.binary} exited: {err}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.binary} did not answer within 10 s")
            time.sleep(0.01)

    def stop(self) -> None:
        """End the server (``stop_signal``); ``start`` may run it again."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
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
