"""Live policy reload on real servers: SIGHUP, --watch, a bad edit, and the real CLI."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest

from gateway.app.factory import create_app
from gateway.app.reload import Reloader
from gateway.serving.pidfile import pidfile_of
from tests.support.bodies import CHAT, chat, without_fingerprint
from tests.support.gateways import gateway_settings
from tests.support.limits import auth, write_keys
from tests.support.metrics import Scrape
from tests.support.paths import BATCH_PROFILE, POLICY, ROOT
from tests.support.servers import free_port, running_server, serve_environ

ORIGINAL = POLICY.read_text()
REJECT_LOGPROBS = "      logprobs:\n        action: reject\n        type: boolean\n"
assert REJECT_LOGPROBS in ORIGINAL
# The edit of the README's "When the engine gains a feature".
LOGPROBS_PASS = ORIGINAL.replace(REJECT_LOGPROBS, REJECT_LOGPROBS.replace("reject", "pass"))
TYPO = ORIGINAL.replace(REJECT_LOGPROBS, REJECT_LOGPROBS.replace("reject", "rejct"))
SSE = [b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n', b"data: [DONE]\n\n"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` the way editors do: a new file renamed over the old one."""
    staging = path.parent.parent / "staging"
    staging.mkdir(exist_ok=True)
    new = staging / path.name
    new.write_text(text)
    os.replace(new, path)


class Engine:
    """A mocked engine whose streams wait for ``release`` before they end."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": []})
        body = json.loads(request.content)
        self.bodies.append(body)
        if body.get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._chunks()
            )
        return httpx.Response(200, json={"id": "x", "choices": []})

    async def _chunks(self) -> AsyncIterator[bytes]:
        yield SSE[0]
        await self.release.wait()
        yield SSE[1]


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policies" / "policy.yaml"
    path.parent.mkdir()
    path.write_text(ORIGINAL)
    return path


@asynccontextmanager
async def gateway(
    policy: Path, engine: Engine, *, watch: bool = False
) -> AsyncIterator[tuple[httpx.AsyncClient, Reloader]]:
    settings = gateway_settings(
        policy=policy, overrides={("watch_policy",): watch, ("log", "requests"): False}
    )
    app = create_app(settings, transport=httpx.MockTransport(engine))
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield client, app.state.reloader


def send_sighup() -> None:
    # Without the gateway's handler SIGHUP would end the test run: make sure first.
    assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    os.kill(os.getpid(), signal.SIGHUP)


async def attempts(reloader: Reloader, count: int) -> None:
    with anyio.fail_after(60):
        await reloader.wait_for_attempts(count)


@pytest.mark.anyio
async def test_valid_edit_takes_effect_without_dropping_an_in_flight_stream(
    policy: Path,
) -> None:
    engine = Engine()
    async with gateway(policy, engine) as (client, reloader):
        assert (await client.post(CHAT, json=chat(logprobs=True))).status_code == 400
        async with client.stream("POST", CHAT, json=chat(stream=True)) as stream:
            received = stream.aiter_raw()
            assert without_fingerprint(await received.__anext__()) == SSE[0]

            write_atomically(policy, LOGPROBS_PASS)
            send_sighup()
            await attempts(reloader, 1)
            assert reloader.last is not None and reloader.last.result == "loaded"

            # New requests get the new policy while the old stream is still open.
            answer = await client.post(CHAT, json=chat(logprobs=True))
            assert answer.status_code == 200
            assert engine.bodies[-1]["logprobs"] is True
            engine.release.set()
            rest = [chunk async for chunk in received]
        assert b"".join([SSE[0], *rest]) == b"".join(SSE)

        ready = (await client.get("/readyz")).json()
        assert ready["policy"]["sha256"] == sha256(LOGPROBS_PASS)
        assert ready["policy"]["last_reload"]["result"] == "loaded"
        assert ready["policy"]["last_reload"]["trigger"] == "SIGHUP"
        m = Scrape((await client.get("/metrics")).text)
        assert m("ft_gateway_policy_reloads_total", result="loaded") == 1
        info = {"path": str(policy), "sha256": sha256(LOGPROBS_PASS)}
        assert m("ft_gateway_policy_info", **info) == 1
        assert m("ft_gateway_policy_info", path=str(policy), sha256=sha256(ORIGINAL)) is None

        send_sighup()  # the same file again
        await attempts(reloader, 2)
        assert reloader.last is not None and reloader.last.result == "unchanged"


@pytest.mark.anyio
async def test_invalid_edit_leaves_the_old_policy_serving(
    policy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Engine()
    async with gateway(policy, engine) as (client, reloader):
        write_atomically(policy, TYPO)
        with caplog.at_level(logging.INFO, logger="gateway"):
            send_sighup()
            await attempts(reloader, 1)
        assert reloader.last is not None and reloader.last.result == "failed"

        refused = await client.post(CHAT, json=chat(logprobs=True))
        assert refused.status_code == 400
        assert (await client.post(CHAT, json=chat(logprobs=False))).status_code == 200

        ready = (await client.get("/readyz")).json()
        assert ready["policy"]["sha256"] == sha256(ORIGINAL)
        assert ready["policy"]["last_reload"]["result"] == "failed"
        # /readyz (no key needed) says it failed, not why nor where: the log does.
        assert "rejct" not in json.dumps(ready) and str(policy) not in json.dumps(ready)
        assert "problem" in ready["policy"]["last_reload"]["error"]
        assert reloader.last.error is not None
        assert "got \"rejct\" (did you mean 'reject'?)" in reloader.last.error
        m = Scrape((await client.get("/metrics")).text)
        assert m("ft_gateway_policy_reloads_total", result="failed") == 1
        assert m("ft_gateway_policy_reloads_total", result="loaded") == 0
        info = {"path": str(policy), "sha256": sha256(ORIGINAL)}
        assert m("ft_gateway_policy_info", **info) == 1

        [logged] = [r for r in caplog.records if r.name == "gateway.reload" and r.levelno >= 40]
        assert (
            logged.getMessage() == "reload failed; the live policy, API keys and rate limits stay"
        )
        assert logged.__dict__["live_sha256"] == sha256(ORIGINAL)
        assert f"{policy}:" in logged.__dict__["error"]

        policy.unlink()  # a missing file is a failed reload too
        send_sighup()
        await attempts(reloader, 2)
        assert reloader.last is not None and reloader.last.result == "failed"
        assert "cannot read file" in (reloader.last.error or "")
        assert (await client.post(CHAT, json=chat(logprobs=True))).status_code == 400


@pytest.mark.anyio
async def test_watch_reloads_on_change(policy: Path) -> None:
    engine = Engine()
    async with gateway(policy, engine, watch=True) as (client, reloader):
        write_atomically(policy, LOGPROBS_PASS)
        await attempts(reloader, 1)
        assert reloader.last is not None
        assert (reloader.last.result, reloader.last.trigger) == ("loaded", "watch")
        assert (await client.post(CHAT, json=chat(logprobs=True))).status_code == 200

        write_atomically(policy, TYPO)
        await attempts(reloader, 2)
        assert reloader.last.result == "failed"
        assert (await client.post(CHAT, json=chat(logprobs=True))).status_code == 200

        write_atomically(policy, ORIGINAL)
        await attempts(reloader, 3)
        assert reloader.last.result == "loaded"
        assert (await client.post(CHAT, json=chat(logprobs=True))).status_code == 400


@pytest.mark.anyio
async def test_watch_reloads_the_api_keys(policy: Path, tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    directory.mkdir()
    keys = write_keys(directory, {"alice": None, "bob": None})
    settings = gateway_settings(
        policy=policy,
        overrides={
            ("watch_policy",): True,
            ("log", "requests"): False,
            ("auth", "keys_file"): str(keys),
        },
    )
    app = create_app(settings, transport=httpx.MockTransport(Engine()))
    reloader: Reloader = app.state.reloader
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:

        async def status(name: str) -> int:
            return (await client.post(CHAT, json=chat(), headers=auth(name))).status_code

        assert (await status("bob"), await status("carol")) == (200, 401)
        staging = tmp_path / "new"
        staging.mkdir()
        write_atomically(keys, write_keys(staging, {"alice": None, "carol": None}).read_text())
        await attempts(reloader, 1)
        assert reloader.last is not None
        assert (reloader.last.result, reloader.last.changed) == ("loaded", ("API keys",))
        assert (await status("bob"), await status("carol"), await status("alice")) == (
            401,
            200,
            200,
        )


def read_until(stream: IO[str], event: str) -> dict[str, Any]:
    """The next JSON log line of ``event`` (blocking reads: each line is an event)."""
    while True:
        line = stream.readline()
        assert line, "the gateway exited"
        record: dict[str, Any] = json.loads(line)
        if record.get("event") == event:
            return record


def test_sighup_reaches_a_real_serve_process(policy: Path) -> None:
    port = free_port()
    engine_port = free_port()  # nothing listens there: the engine is down
    env = serve_environ()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway",
            "serve",
            "--workers",
            "1",
            "--policy",
            str(policy),
            "--port",
            str(port),
            "--upstream",
            f"http://127.0.0.1:{engine_port}",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    pidfile = pidfile_of(gateway_settings(overrides={("listen", "port"): port}))
    try:
        live = read_until(proc.stdout, "policy_live")
        assert live["sha256"] == sha256(ORIGINAL)
        assert live["level"] == "info" and live["logger"] == "gateway.reload"
        while "Uvicorn running" not in json.loads(proc.stdout.readline())["message"]:
            pass
        assert pidfile is not None and pidfile.read_text() == f"{proc.pid}\n"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.post(CHAT, json=chat(logprobs=True)).status_code == 400
            refused = read_until(proc.stdout, "request")
            assert refused["fields"] == {"logprobs": "rejected"}

            write_atomically(policy, LOGPROBS_PASS)
            proc.send_signal(signal.SIGHUP)
            loaded = read_until(proc.stdout, "reload")
            assert loaded["message"] == "reloaded: policy"
            assert loaded["sha256"] == sha256(LOGPROBS_PASS)
            assert loaded["previous_sha256"] == sha256(ORIGINAL)

            # Now forwarded, to an engine that is down.
            assert client.post(CHAT, json=chat(logprobs=True)).status_code == 502
            forwarded = read_until(proc.stdout, "request")
            assert (forwarded["policy"], forwarded["error"]) == ("passed", "upstream_unreachable")
            ready = client.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["policy"]["sha256"] == sha256(LOGPROBS_PASS)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stdout.close()
    # Drained and exited through serve's cleanup: the pidfile is gone.
    assert proc.returncode == 0
    assert not pidfile.exists()


@pytest.mark.anyio
async def test_a_policy_must_keep_the_profiles_api_keys_select(
    policy: Path, tmp_path: Path
) -> None:
    policy.write_text(ORIGINAL + BATCH_PROFILE)
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys:\n  - {{name: batch, sha256: {'a' * 64}, profile: batch}}\n")
    settings = gateway_settings(policy=policy, overrides={("auth", "keys_file"): str(keys)})
    app = create_app(settings, transport=httpx.MockTransport(Engine()))
    reloader: Reloader = app.state.reloader
    policy.write_text(LOGPROBS_PASS)  # the profile is gone
    result = await reloader.reload("test")
    assert result is not None and result.result == "failed"
    assert result.error == (
        f"{keys}:2: keys[0].profile: profile 'batch' is not defined in the policy's 'profiles'"
    )
    assert app.state.gateway.policy.digest == sha256(ORIGINAL + BATCH_PROFILE)
    policy.write_text(LOGPROBS_PASS + BATCH_PROFILE)
    result = await reloader.reload("test")
    assert result is not None and result.result == "loaded"
