"""Graceful shutdown: /readyz 503 at once, in-flight requests finish within the drain
time-out, then end with a 503 or an SSE error event; a real ``ft-gateway serve``
process on SIGTERM answers /readyz 503 on new connections while it drains, then
exits. The ``fake_engine`` and the ``gateway`` (with this module's ``settings``)
are tests/support/fixtures.py's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from gateway.serving.server import guarded_protocol
from gateway.settings import Settings
from tests.support.bodies import CHAT, chat, error_event, sse_events
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE, HELD, fault_settings
from tests.support.gateways import Gateway
from tests.support.paths import POLICY, ROOT
from tests.support.servers import free_port, serve_environ

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(fake_engine: FakeEngine) -> Settings:
    # Long engine time-outs: only the drain may end these requests.
    return fault_settings(fake_engine.url, **HELD)


async def first_event_then_rest(
    client: httpx.AsyncClient, headers: dict[str, str], started: anyio.Event, out: list[str]
) -> None:
    """Stream a chat completion; set ``started`` at the first event; ``out`` gets the text."""
    async with client.stream("POST", CHAT, json=chat(stream=True), headers=headers) as response:
        assert response.status_code == 200
        text = ""
        async for piece in response.aiter_text():
            text += piece
            if "data: " in text:
                started.set()
        out.append(text)


async def test_drain_readyz_503_new_requests_503_then_in_flight_ended(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    state = gateway.app.state.gateway
    finishing: list[str] = []
    cut: list[str] = []
    waiting: dict[str, httpx.Response] = {}
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            assert (await client.get("/readyz")).status_code == 200
            async with anyio.create_task_group() as tg:
                started_a, started_b = anyio.Event(), anyio.Event()
                tg.start_soon(
                    first_event_then_rest, client, {"x-bad-gate": "a"}, started_a, finishing
                )
                tg.start_soon(first_event_then_rest, client, {"x-bad-gate": "b"}, started_b, cut)
                hang_id = uuid.uuid4().hex

                async def hang() -> None:
                    waiting["r"] = await client.post(
                        CHAT, json=chat(), headers={"x-bad-mode": "hang", "x-request-id": hang_id}
                    )

                tg.start_soon(hang)
                await started_a.wait()
                await started_b.wait()
                await fake_engine.wait_for_request(hang_id)

                state.drain.begin(1.0)  # what SIGTERM does in ft-gateway serve
                ready = await client.get("/readyz")
                assert ready.status_code == 503 and ready.json() == {"status": "draining"}
                late = await client.post(CHAT, json=chat())
                assert late.status_code == 503
                assert late.json()["error"]["code"] == "shutting_down"
                assert late.headers["retry-after"] == "1"

                fake_engine.gate("a").set()  # this stream finishes within the drain time-out
    assert sse_events(finishing[0])[-1] == "data: [DONE]" and "error" not in finishing[0]
    assert error_event(cut[0])["code"] == "shutting_down"  # and then [DONE]
    # ... and its record (the access log's line) says so: a 200 cut with shutting_down.
    records = gateway.recorder.finished_exchanges
    cut_short = [r for r in records if r.status == 200 and r.error_code == "shutting_down"]
    assert len(cut_short) == 1 and cut_short[0].stream
    assert waiting["r"].status_code == 503
    assert waiting["r"].json()["error"]["code"] == "shutting_down"
    assert state.drain.in_flight == 0


async def wait_until_refused(port: int) -> None:
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except (ConnectionRefusedError, ConnectionResetError):
            # Refused, or reset: a connect that reached the backlog just as the
            # listening socket closed. Either way, no longer accepting.
            return
        writer.close()
        await asyncio.sleep(0.01)


async def wait_until_draining(url: str) -> None:
    """Ask /readyz on a new connection each time until it answers 503 draining."""
    while True:
        async with httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client:
            ready = await client.get("/readyz")
        if ready.status_code == 503:
            assert ready.json() == {"status": "draining"}
            return
        assert ready.status_code == 200


async def wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        while True:
            assert process.poll() is None, "ft-gateway serve exited"
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                await asyncio.sleep(0.05)


SECRET_KEY = "sk-secret-client-key-0123456789"
SECRET_PROMPT = "the launch code is 0000-PROMPT-SECRET"


async def test_sigterm_stops_accepting_drains_and_exits(tmp_path: Path) -> None:
    port = free_port()
    async with FakeEngine() as engine:
        config = {
            "listen": {"host": "127.0.0.1", "port": port},
            "upstream": {"url": engine.url},
            "timeouts": {"stream_idle": 60, "response": 60},
            "server": {"drain_timeout": 3},
            "policy": str(POLICY),
        }
        path = tmp_path / "config.yaml"
        path.write_text(json.dumps(config))  # JSON is YAML
        env = serve_environ()
        log = tmp_path / "serve.log"
        with log.open("wb") as sink:
            command = [sys.executable, "-m", "gateway", "serve", "--config", str(path)]
            process = subprocess.Popen(
                [*command, "--log-level", "debug"],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            with anyio.fail_after(DEADLINE * 2):
                await wait_until_serving(url, process)
                finishing: list[str] = []
                cut: list[str] = []
                async with httpx.AsyncClient(base_url=url, timeout=DEADLINE) as client:
                    secret = chat(messages=[{"role": "user", "content": SECRET_PROMPT}])
                    auth = {"authorization": f"Bearer {SECRET_KEY}"}
                    assert (await client.post(CHAT, json=secret, headers=auth)).status_code == 200
                    rejected = await client.post(
                        CHAT, json={**secret, "logit_bias": {"1": 5}}, headers=auth
                    )
                    assert rejected.status_code == 400
                    async with anyio.create_task_group() as tg:
                        started_a, started_b = anyio.Event(), anyio.Event()
                        tg.start_soon(
                            first_event_then_rest, client, {"x-bad-gate": "a"}, started_a, finishing
                        )
                        tg.start_soon(
                            first_event_then_rest, client, {"x-bad-gate": "b"}, started_b, cut
                        )
                        await started_a.wait()
                        await started_b.wait()
                        process.send_signal(signal.SIGTERM)
                        # Still answering on new connections while it drains: a
                        # probe gets the documented 503, not a refused connection.
                        await wait_until_draining(url)
                        async with httpx.AsyncClient(base_url=url, timeout=DEADLINE) as late:
                            refused = await late.post(CHAT, json=chat())
                            assert refused.status_code == 503
                            assert refused.json()["error"]["code"] == "shutting_down"
                        engine.gate("a").set()
                returncode = await anyio.to_thread.run_sync(process.wait)
                await wait_until_refused(port)  # and once drained, it is gone
                await asyncio.gather(*(c.closed.wait() for c in engine.connections))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            output = log.read_text(errors="replace")
    assert returncode in (0, -signal.SIGTERM), output
    assert sse_events(finishing[0])[-1] == "data: [DONE]" and "error" not in finishing[0]
    tail = sse_events(cut[0])
    assert tail[-1] == "data: [DONE]", output
    assert error_event(cut[0])["code"] == "shutting_down"
    assert "Shutting down" in output  # the debug log was captured ...
    assert SECRET_KEY not in output and "PROMPT-SECRET" not in output  # ... and keeps secrets


class _TestServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the test runner."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def test_a_connection_accepted_as_the_server_stops_gets_its_answer() -> None:
    """Stopping, the server answers a request on a connection it had already accepted
    rather than closing it unanswered (a probe would read that as a crash)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"draining"})

    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="warning",
        http=guarded_protocol(max_head_bytes=65536, head_timeout=DEADLINE),
    )
    server = _TestServer(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.005)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not server.server_state.connections:
            await asyncio.sleep(0.005)  # accepted: the server knows the connection
        server.should_exit = True
        while server.servers and server.servers[0].is_serving():
            await asyncio.sleep(0.005)  # stopping: the listener is closed, as is `shutdown`
        writer.write(b"GET /readyz HTTP/1.1\r\nhost: gateway\r\n\r\n")
        with anyio.fail_after(DEADLINE):
            answer = await reader.read()  # to the end: the server closes after answering
        writer.close()
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"connection: close" in answer.lower() and b"\r\ndraining\r\n" in answer
    finally:
        server.should_exit = True
        with anyio.fail_after(DEADLINE):
            await task
