"""scripts/image's smoke test of a built image: run as Kubernetes runs it, on loopback.

Usage: .venv/bin/python deploy/image/smoke.py IMAGE

The reference engine runs on this host (127.0.0.1, a free port); the image runs with
podman on the host's network with FT_GATEWAY_HOST=127.0.0.1, so nothing listens beyond
loopback: as the image's own user (10001:10001), every capability dropped, no new
privileges, a read-only root with a tmpfs /tmp, two workers, and API keys from a 0440
file owned by root and group 10001 (as a Secret with fsGroup is mounted). Checks the
healthcheck, /healthz, /readyz, a chat completion with the official SDK, a request
without a key refused, /metrics on the metrics port, `ft-gateway reload` run in the
container (its pidfile on the tmpfs), that the root is read-only and
the package is the installed one; then SIGTERM while a stream is in flight: the stream
ends whole and the container exits 0. Exits non-zero with the reason on any failure.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from openai import OpenAI

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-smoke-" + os.urandom(8).hex()
UID_GID = "10001:10001"  # the Dockerfile's user, deploy/kubernetes' runAsUser/runAsGroup
STEP_DELAY_MS = 150  # the engine's pause per token: a stream lasts seconds
START_TIMEOUT = 120.0  # seconds for the container to become healthy on a loaded machine


class SmokeFailed(Exception):
    """A check of the smoke test failed."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SmokeFailed(what)
    print(f"  ok  {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def podman(*args: str, check_rc: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    if check_rc and done.returncode != 0:
        raise SmokeFailed(f"podman {' '.join(args)}: {done.stderr.strip()}")
    return done


def running(name: str) -> bool:
    state = podman("inspect", "--format", "{{.State.Running}}", name, check_rc=False)
    return state.stdout.strip() == "true"


def wait_until(what: str, name: str, probe: Any) -> None:
    """Polls ``probe`` until true; fails at once if the container stopped."""
    deadline = time.monotonic() + START_TIMEOUT
    while not probe():
        if not running(name):
            raise SmokeFailed(f"the container stopped before {what}")
        if time.monotonic() > deadline:
            raise SmokeFailed(f"no {what} within {START_TIMEOUT:.0f} s")
        time.sleep(0.5)


def answers(url: str, status: int = 200) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == status
    except httpx.TransportError:
        return False


def keys_dir(tmp: Path) -> Path:
    """keys.yaml as a Secret mounts it with fsGroup 10001: root:10001, mode 0440."""
    folder = tmp / "keys"
    folder.mkdir()
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    path = folder / "keys.yaml"
    path.write_text(f"keys:\n  - name: smoke\n    sha256: {digest!r}\n")
    os.chown(path, 0, 10001)
    path.chmod(0o440)
    folder.chmod(0o755)
    return folder


def smoke(image: str, tmp: Path) -> None:
    engine_port, port, metrics_port = free_port(), free_port(), free_port()
    name = f"ft-gateway-smoke-{os.getpid()}"
    base = f"http://127.0.0.1:{port}"
    engine = subprocess.Popen(
        [sys.executable, "-m", "refengine", "--port", str(engine_port)]
        + ["--step-delay-ms", str(STEP_DELAY_MS), "--log-level", "warning"],
        cwd=ROOT,
    )
    try:
        podman(
            "run", "--detach", "--name", name, "--network", "host",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m",
            "--volume", f"{keys_dir(tmp)}:/etc/ft-gateway/keys:ro",
            "--env", "FT_GATEWAY_HOST=127.0.0.1",
            "--env", f"FT_GATEWAY_PORT={port}",
            "--env", f"FT_GATEWAY_LISTEN__METRICS_PORT={metrics_port}",
            "--env", f"FT_GATEWAY_UPSTREAM=http://127.0.0.1:{engine_port}",
            "--env", "FT_GATEWAY_AUTH__KEYS_FILE=/etc/ft-gateway/keys/keys.yaml",
            image, "ft-gateway", "serve", "--workers", "2",
        )  # fmt: skip
        try:
            checks(name, base, metrics_port)
        except BaseException:
            print(podman("logs", "--tail", "40", name, check_rc=False).stdout, file=sys.stderr)
            raise
        finally:
            podman("rm", "--force", "--time", "0", name, check_rc=False)
    finally:
        engine.terminate()
        engine.wait()


def checks(name: str, base: str, metrics_port: int) -> None:
    user = podman("inspect", "--format", "{{.Config.User}}", name).stdout.strip()
    check(user == UID_GID, f"runs as the image's user {user} (uid:gid {UID_GID}), not root")
    wait_until(
        "healthy", name, lambda: podman("healthcheck", "run", name, check_rc=False).returncode == 0
    )
    check(True, "the image's HEALTHCHECK passes")
    check(answers(f"{base}/healthz"), "/healthz 200")
    wait_until("/readyz 200", name, lambda: answers(f"{base}/readyz"))
    check(True, "/readyz 200 (the engine answers)")

    client = OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=60)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=24
    )
    check(bool(reply.choices[0].message.content), f"chat completion from {model} (key read)")
    refused = httpx.post(f"{base}/v1/chat/completions", json={"model": model}, timeout=10)
    check(refused.status_code == 401, f"no API key: {refused.status_code}")
    metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
    check(
        metrics.status_code == 200 and "ft_gateway_requests_total" in metrics.text,
        f"/metrics on the metrics port {metrics_port}",
    )
    # The pidfile and reload results live on the tmpfs /tmp: reload works on a read-only root.
    reload = podman("exec", name, "ft-gateway", "reload", check_rc=False)
    said = (reload.stdout + reload.stderr).strip().splitlines()
    check(reload.returncode == 0, f"ft-gateway reload in the container: {said[-1] if said else ''}")
    wrote = podman("exec", name, "touch", "/opt/ft-gateway/x", check_rc=False)
    check(wrote.returncode != 0, "the root file system is read-only")
    where = podman("exec", name, "python3", "-c", "import gateway; print(gateway.__file__)")
    installed = where.stdout.strip().startswith("/opt/ft-gateway/app/gateway/")
    check(installed, f"imports the installed package: {where.stdout.strip()}")
    drain(name, client, model)


def drain(name: str, client: OpenAI, model: str) -> None:
    """SIGTERM while a stream is in flight: the stream ends whole, the exit status is 0."""
    chunks = 0
    finish = None
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Tell a long story."}],
        max_tokens=32,  # at 150 ms a token: seconds in flight, well within the 30 s drain
        stream=True,
    )
    with stream:
        for chunk in stream:
            chunks += 1
            if chunks == 1:
                podman("kill", "--signal", "TERM", name)
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
    check(finish in {"stop", "length"}, f"the stream in flight ended whole ({finish})")
    code = podman("wait", name).stdout.strip()
    check(code == "0", f"the container exited {code} after draining")
    # The stream was still in flight when the drain began: its request line comes after.
    logs = subprocess.run(
        ["podman", "logs", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    events = logs.stdout.splitlines()
    signalled = next((i for i, e in enumerate(events) if "shutting down" in e.lower()), None)
    streamed = [i for i, e in enumerate(events) if "/v1/chat/completions" in e]
    if signalled is None or not streamed or streamed[-1] < signalled:
        raise SmokeFailed("the stream had ended before the drain began: " + "\n".join(events))
    check(True, "the stream was in flight when the drain began: its request line follows")
    print(f"        {events[signalled][:150]}\n        {events[streamed[-1]][:150]}")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    image = sys.argv[1]
    print(f"smoke test of {image}:")
    try:
        with tempfile.TemporaryDirectory(prefix="ft-gateway-smoke-") as tmp:
            smoke(image, Path(tmp))
    except SmokeFailed as failure:
        print(f"smoke test FAILED: {failure}", file=sys.stderr)
        return 1
    print("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
