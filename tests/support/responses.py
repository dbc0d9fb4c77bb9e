"""Bodies of the Responses API as the tests send them and read them back, settings with a
response store, and the gateway as a process of its own (``gateway_process``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from gateway.settings import Settings
from tests.support.bodies import MODEL
from tests.support.gateways import gateway_settings
from tests.support.paths import POLICY, ROOT
from tests.support.servers import free_port, serve_environ

RESPONSES = "/v1/responses"


def responses_request(**fields: Any) -> dict[str, Any]:
    """A Responses request: the model, a string input, and ``fields``."""
    return {"model": MODEL, "input": "hi", **fields}


def store_settings(
    upstream: str | None = None, *, backend: str = "memory", **store: Any
) -> Settings:
    """The default settings with the response store ``backend`` (and ``store`` keys)."""
    flags: dict[tuple[str, ...], Any] = {("store", "backend"): backend}
    flags.update({("store", k): v for k, v in store.items()})
    return gateway_settings(upstream, overrides=flags)


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A Responses event stream as (event name, data) pairs; checks each event's framing."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:]
        events.append((lines[0][7:], data))
    return events


@contextlib.asynccontextmanager
async def gateway_process(config: dict[str, Any], tmp_path: Path) -> AsyncIterator[str]:
    """``python -m gateway serve`` as a process of its own with ``config`` (and a free
    port); yields its URL once /healthz answers, and stops it (SIGTERM) after."""
    port = free_port()
    config = {"listen": {"host": "127.0.0.1", "port": port}, "policy": str(POLICY), **config}
    path = tmp_path / f"config-{port}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    log = tmp_path / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(path)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=serve_environ(),
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as client:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"ft-gateway serve exited: {log.read_text()}")
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
        yield url
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 30)
