"""``ft-gateway serve`` started for real as a separate process (``gateway_process``), and
what the tests of its worker processes need: the log line that says it serves, one
keep-alive client pinned to each worker (``pin``), the children of a process.

(tests/support/gateways.py's ``Gateway`` is the gateway served in the test's own process.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.paths import POLICY
from tests.support.servers import serve_environ

SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+) with (\d+) workers \(pids ([\d, ]+)\)")
# What one process (no --workers, or --workers 1) logs once it serves.
SERVING_ALONE = re.compile(r"Uvicorn running on (http://[\d.]+:\d+)")
START_TIMEOUT = 20


@dataclass
class GatewayProcess:
    """A running ``ft-gateway serve`` (one process or a parent of workers) and the lines
    it has logged."""

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

    async def serving(self) -> tuple[str, list[int]]:
        """Its URL and the pids that serve it, once it says it serves."""
        match = await self.wait_for_line(f"{SERVING.pattern}|{SERVING_ALONE.pattern}")
        if match[1] is not None:
            return f"http://127.0.0.1:{match[1]}", [int(p) for p in match[3].split(", ")]
        return match[4], [self.process.pid]


@contextlib.asynccontextmanager
async def spawned(
    *args: str, env: dict[str, str], cwd: Path, stderr: int = asyncio.subprocess.STDOUT
) -> AsyncIterator[GatewayProcess]:
    """``python -m gateway ARGS`` as a process of its own (its own process group), with
    exactly ``env``, in ``cwd``; its stdout read by the GatewayProcess, its stderr there too
    unless told otherwise. Killed with its workers after."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group, to kill workers and all
    )
    try:
        yield GatewayProcess(process)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


@contextlib.asynccontextmanager
async def gateway_process(
    *args: str,
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    tmp: Path,
) -> AsyncIterator[GatewayProcess]:
    """``ft-gateway serve --port 0 ARGS`` ``spawned`` in ``tmp`` (where it finds a
    ``config.yaml`` a test wrote there), with ``env`` over this environment less its
    FT_GATEWAY_* variables; ``config``: the settings of a file written for it (the test
    policy unless it names one)."""
    if config is not None:
        fd, path = tempfile.mkstemp(prefix="config-", suffix=".yaml", dir=tmp)
        with os.fdopen(fd, "w") as file:
            json.dump({"policy": str(POLICY), **config}, file)  # JSON is YAML
        args = ("--config", path, *args)
    environ = {**serve_environ(), "TMPDIR": str(tmp), **(env or {})}
    serve = ("serve", "--port", "0", "--log-level", "info", *args)
    async with spawned(*serve, env=environ, cwd=tmp) as gateway:
        yield gateway


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
