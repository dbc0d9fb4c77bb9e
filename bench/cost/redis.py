"""A ``redis-server`` of the bench's own, on a free loopback port (Debian's package;
``scripts/services`` installs it)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import redis

from bench.ports import free_port


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A ``redis-server`` with no persistence on a free loopback port; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (scripts/services installs it)")
    port = free_port(hold=True)
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with (
        tempfile.TemporaryDirectory() as directory,
        subprocess.Popen([*args, "--dir", directory], stdout=subprocess.DEVNULL) as process,
    ):
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.01)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()


def command_calls(url: str, command: str) -> int:
    """How many times Redis has run ``command`` (its INFO commandstats), e.g. evalsha."""
    client = redis.Redis.from_url(url)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
