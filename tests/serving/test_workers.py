"""``ft-gateway serve --workers N``, started for real as a separate process.

The engine runs in the test's event loop; the gateway is a real parent process
with two worker processes. A connection is pinned to a worker by keep-alive,
and ``/healthz`` says which process answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from gateway.serving.workers import _cgroup_cpu_quota, available_cpus
from tests.support.bodies import CHAT, chat
from tests.support.engine import FakeEngine
from tests.support.metrics import Scrape
from tests.support.paths import POLICY
from tests.support.processes import (
    SERVING,
    START_TIMEOUT,
    children_of,
    gateway_process,
    pin,
)
from tests.support.servers import free_port


@pytest.mark.anyio
async def test_two_workers_serve_reload_on_sighup_and_restart(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    original = POLICY.read_text()
    policy.write_text(original)
    metrics_port = free_port()
    async with FakeEngine() as engine:
        engine_url = engine.url
        async with gateway_process(
            "--workers",
            "2",
            "--upstream",
            engine_url,
            "--policy",
            str(policy),
            env={
                "FT_GATEWAY_SERVER__KEEP_ALIVE_TIMEOUT": "600",
                "FT_GATEWAY_LISTEN__METRICS_PORT": str(metrics_port),
            },
            tmp=tmp_path,
        ) as gateway:
            match = await gateway.wait_for_line(SERVING.pattern)
            url = f"http://127.0.0.1:{match[1]}"
            pids = [int(p) for p in match[3].split(",")]
            assert int(match[2]) == 2 and len(set(pids)) == 2
            assert children_of(gateway.process.pid) >= set(pids)
            # Where the workers meet to add up metrics: made by the parent under TMPDIR.
            (worker_dir,) = tmp_path.glob("ftgw-*")
            assert {p.name for p in worker_dir.glob("*.sock")} == {f"{p}.sock" for p in pids}

            pinned = await pin(url, pids)
            try:
                body = chat(n=9)  # above the fan-out's maximum, 8
                for client in pinned.values():
                    refused = await client.post(CHAT, json=body)
                    assert refused.status_code == 400
                    assert refused.json()["error"]["param"] == "n"
                    assert (await client.post(CHAT, json={**body, "n": 1})).status_code == 200
                # Each worker counted its own two; whichever worker answers on the
                # metrics port adds up both.
                assert (await client.get("/metrics")).status_code == 404  # not on the main port
                for _ in range(20):
                    async with httpx.AsyncClient(timeout=30) as scraper:
                        text = (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
                    m = Scrape(text)
                    assert m.total("ft_gateway_requests_total", route=CHAT, status="400") == 2
                    assert m.total("ft_gateway_requests_total", route=CHAT, status="200") == 2
                    assert m.total("ft_gateway_policy_reloads_total") == 0

                # SIGHUP to the parent: every worker reloads the edited policy.
                rule = "n: {action: fanout, type: integer, minimum: 1, maximum: "
                assert rule + "8}" in original
                policy.write_text(original.replace(rule + "8}", rule + "9}"))
                seen = len(gateway.lines)
                os.kill(gateway.process.pid, signal.SIGHUP)
                for _ in pids:
                    match = await gateway.wait_for_line("reloaded: policy", after=seen)
                    seen = gateway.lines.index(match.string) + 1
                for client in pinned.values():
                    assert (await client.post(CHAT, json=body)).status_code == 200
                    ready = (await client.get("/readyz")).json()
                    assert ready["policy"]["last_reload"]["trigger"] == "SIGHUP"
                    assert ready["policy"]["last_reload"]["result"] == "loaded"
                async with httpx.AsyncClient(timeout=30) as scraper:
                    text = (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
                assert Scrape(text).total("ft_gateway_policy_reloads_total", result="loaded") == 2
            finally:
                for client in pinned.values():
                    await client.aclose()

            # A worker that dies is replaced; the others never stopped serving.
            seen = len(gateway.lines)
            os.kill(pids[0], signal.SIGKILL)
            match = await gateway.wait_for_line(r"worker (\d+) started", after=seen)
            replacement = int(match[1])
            assert replacement not in pids
            assert children_of(gateway.process.pid) >= {pids[1], replacement}
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                statuses = await asyncio.gather(
                    *(client.post(CHAT, json={**body, "n": 1}) for _ in range(20))
                )
                assert [r.status_code for r in statuses] == [200] * 20

            # SIGTERM: the workers drain and stop, the parent exits 0 and cleans up.
            gateway.process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(START_TIMEOUT):
                assert await gateway.process.wait() == 0
            assert not worker_dir.exists()
            for pid in (pids[1], replacement):
                assert not Path(f"/proc/{pid}").exists()  # stopped and reaped


@pytest.mark.anyio
async def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with gateway_process(
            "--workers",
            "2",
            "--policy",
            str(POLICY),
            env={"FT_GATEWAY_PORT": str(port)},  # over --port 0
            tmp=tmp_path,
        ) as gateway:
            async with asyncio.timeout(START_TIMEOUT):
                assert await gateway.process.wait() == 3
            assert gateway.process.stdout is not None
            output = await gateway.process.stdout.read()
            assert b"cannot listen on 127.0.0.1" in output
            assert b"address already in use" in output


@pytest.mark.anyio
async def test_a_second_gateway_cannot_join_a_live_port(tmp_path: Path) -> None:
    """A second ``serve --workers 2`` (no API keys) on the port of a gateway with keys
    exits 3, and every request still reaches the first: none gets in without a key."""
    key_hash = hashlib.sha256(b"sk-port-test").hexdigest()
    first_tmp, second_tmp = tmp_path / "first", tmp_path / "second"
    first_tmp.mkdir()
    second_tmp.mkdir()
    async with FakeEngine() as engine:
        serve = ("--workers", "2", "--upstream", engine.url, "--policy", str(POLICY))
        async with gateway_process(
            *serve,
            env={"FT_GATEWAY_AUTH__KEYS_ENV": "PORT_TEST_KEYS", "PORT_TEST_KEYS": f"a:{key_hash}"},
            tmp=first_tmp,
        ) as first:
            port = (await first.wait_for_line(SERVING.pattern))[1]
            async with gateway_process(
                *serve,
                env={"FT_GATEWAY_PORT": port},
                tmp=second_tmp,
            ) as second:
                async with asyncio.timeout(START_TIMEOUT):
                    assert await second.process.wait() == 3
                assert second.process.stdout is not None
                assert b"address already in use" in await second.process.stdout.read()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
                for _ in range(20):
                    # A new connection each time: each could have gone to another listener.
                    refused = await c.post(CHAT, json=chat(), headers={"connection": "close"})
                    assert refused.status_code == 401
                    allowed = await c.post(
                        CHAT,
                        json=chat(),
                        headers={"connection": "close", "authorization": "Bearer sk-port-test"},
                    )
                    assert allowed.status_code == 200


@pytest.mark.anyio
async def test_bad_config_stops_before_any_worker_starts(tmp_path: Path) -> None:
    async with gateway_process(
        "--workers", "2", "--policy", str(tmp_path / "missing.yaml"), tmp=tmp_path
    ) as gateway:
        async with asyncio.timeout(START_TIMEOUT):
            assert await gateway.process.wait() == 2
        assert gateway.process.stdout is not None
        assert b"cannot start" in await gateway.process.stdout.read()
        assert not list(tmp_path.glob("ftgw-*"))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "200000 100000\n"}, 2.0),
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_cgroup_cpu_quota(tmp_path: Path, files: dict[str, str], expected: float | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cgroup_cpu_quota(tmp_path) == expected


def test_available_cpus_is_within_the_affinity_mask() -> None:
    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
