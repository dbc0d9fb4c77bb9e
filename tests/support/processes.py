"""``ft-gateway serve`` started for real as a separate process (``gateway_process``), and
what the tests of its worker processes need: the log line that says it serves, one
keep-alive client pinned to each worker (``pin``), the children of a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+) with (\d+) workers \(pids ([\d, ]+)\)")
START_TIMEOUT = 20


@dataclass
class Gateway:
    """A running ``ft-gateway serve --workers N`` and the lines it has logged."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    url: str = ""
    pids: list[int] = field(default_factory=list)

    async def wait_for_line(self, pattern: str, *, after: int = 0) -> re.Match[str]:
        """The first log line from index ``after`` on that matches ``pattern``."""
        index = after
        async with asyncio.timeout(START_TIMEOUT):
            while True:
                while index < len(self.lines):
                    match = re.search(pattern, self.lines[index])
                    if match:
                        return match
                    index += 1
                assert self.process.stdout is not None
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError("the gateway exited:\n" + "\n".join(self.lines))
                self.lines.append(raw.decode(errors="replace").rstrip())


@contextlib.asynccontextmanager
async def gateway_process(
    *args: str, env: dict[str, str] | None = None, tmp: Path
) -> AsyncIterator[Gateway]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "serve",
        "--port",
        "0",
        "--log-level",
        "info",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(tmp), **(env or {})},
        cwd=tmp,  # no ./config.yaml
        start_new_session=True,  # its own process group, to kill workers and all
    )
    gateway = Gateway(process)
    try:
        yield gateway
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


def children_of(pid: int) -> set[int]:
    """Live child processes of ``pid``, from /proc."""
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                children.add(int(stat.parent.name))
    return children


async def pin(url: str, pids: list[int]) -> dict[int, httpx.AsyncClient]:
    """One keep-alive client per worker: new connections until each worker answered one.
    Whichever idle worker accepts first gets a connection, so a few tries reach each."""
    pinned: dict[int, httpx.AsyncClient] = {}
    for _ in range(200):
        client = httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=1))
        pid = (await client.get("/healthz")).json()["pid"]
        if pid in pinned:
            await client.aclose()
            continue
        pinned[pid] = client
        if len(pinned) == len(pids):
            break
    assert sorted(pinned) == sorted(pids), "a worker never got a connection"
    return pinned
