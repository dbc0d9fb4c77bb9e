"""Servers a bench starts as processes of its own (reference engines, a gateway), and the
wait until each answers."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator

import httpx


async def until_ok(url: str, what: str) -> None:
    """Poll ``GET url`` until it answers 200 (SystemExit after 60 s: ``what`` did not start)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start")
            await asyncio.sleep(0.05)


@contextlib.contextmanager
def processes(commands: list[tuple[list[str], dict[str, str]]]) -> Iterator[list[int]]:
    """Start each (command, environment), output discarded; yield their pids; stop them."""
    procs = [
        subprocess.Popen(c, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c, e in commands
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
