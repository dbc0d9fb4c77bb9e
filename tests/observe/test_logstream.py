"""One log stream: with ``log.format: json`` every line the process writes, its
own, uvicorn's, the OpenTelemetry SDK's and Python's, is a JSON object on stdout
with a ``level``; stderr stays empty. Started for real, with tracing pointed at a
collector that is down (a loopback port bound by the test, never listening)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.bodies import CHAT, chat
from tests.support.engine import FakeEngine
from tests.support.paths import POLICY
from tests.support.processes import SERVING, START_TIMEOUT, spawned


@pytest.mark.anyio
async def test_every_line_is_json_on_stdout_when_the_collector_is_down(tmp_path: Path) -> None:
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))  # bound, so no one else takes it; not listening
        collector = f"http://127.0.0.1:{dead.getsockname()[1]}/v1/traces"
        async with FakeEngine() as engine:
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("FT_GATEWAY_", "OTEL_"))
            }
            env.update(
                TMPDIR=str(tmp_path),
                FT_GATEWAY_PORT="0",
                FT_GATEWAY_TRACING__ENABLED="true",
                FT_GATEWAY_TRACING__ENDPOINT=collector,
                FT_GATEWAY_TRACING__SCHEDULE_DELAY="0.1",
                FT_GATEWAY_TRACING__EXPORT_TIMEOUT="1",
                FT_GATEWAY_LISTEN__METRICS_PORT="0",  # a second server in each worker
                PYTHONWARNINGS="always",
            )
            serve = ("serve", "--workers", "2", "--upstream", engine.url, "--policy", str(POLICY))
            stderr = asyncio.subprocess.PIPE
            async with spawned(*serve, env=env, cwd=tmp_path, stderr=stderr) as gateway:
                started = await gateway.wait_for_line(r'"message":"ft-gateway starting"')
                first = json.loads(started.string)
                assert first["tracing"] == collector
                assert first["python"].startswith("CPython 3.")
                port = (await gateway.wait_for_line(SERVING.pattern))[1]
                async with httpx.AsyncClient(timeout=30) as client:
                    for _ in range(4):
                        answer = await client.post(f"http://127.0.0.1:{port}{CHAT}", json=chat())
                        assert answer.status_code == 200
                # The SDK's own lines about the failed exports.
                await gateway.wait_for_line("Failed to export")
                process = gateway.process
                process.send_signal(signal.SIGTERM)
                assert process.stdout is not None and process.stderr is not None
                async with asyncio.timeout(START_TIMEOUT):
                    rest, errors = await asyncio.gather(
                        process.stdout.read(), process.stderr.read()
                    )
                    assert await process.wait() == 0
    lines = [*gateway.lines, *rest.decode().splitlines()]
    assert errors.decode() == ""
    records = [json.loads(line) for line in lines]
    assert all(r["level"] in ("debug", "info", "warning", "error", "critical") for r in records)
    loggers = {r.get("logger") for r in records}
    assert {"gateway", "uvicorn.error"} <= loggers
    assert any(str(name).startswith("opentelemetry") for name in loggers)
    requests = [r for r in records if r.get("event") == "request"]
    assert len(requests) == 4 and all(r["level"] == "info" for r in requests)
    # uvicorn's start line once per worker, though each runs two servers (metrics port).
    starts = [r for r in records if str(r.get("message")).startswith("Started server process")]
    assert len(starts) == 2


def test_warnings_and_uncaught_exceptions_join_the_stream() -> None:
    program = (
        "import threading, warnings\n"
        "from gateway.observe.logs import setup_logging\n"
        "setup_logging('json', 'info')\n"
        "warnings.warn('an old API', DeprecationWarning)\n"
        "worker = threading.Thread(target=lambda: 1 / 0, name='exporter')\n"
        "worker.start()\n"
        "worker.join()\n"
        "raise RuntimeError('at the top')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", program],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == ""
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["level"], r["logger"]) for r in records] == [
        ("warning", "py.warnings"),
        ("error", "gateway.crash"),
        ("critical", "gateway.crash"),
    ]
    assert "an old API" in records[0]["message"]
    assert records[1]["message"] == "uncaught exception in thread exporter"
    assert "ZeroDivisionError" in records[1]["exception"]
    assert "RuntimeError: at the top" in records[2]["exception"]
