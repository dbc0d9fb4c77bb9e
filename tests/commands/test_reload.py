"""``ft-gateway reload`` against a real ``serve --workers 2``: every kind of invalid
reload is refused whole, with its reason, in the exit status and in every worker; a
valid one changes the API keys, their profiles and the limits in every worker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.access.keys import hash_key
from tests.support.bodies import CHAT, chat
from tests.support.engine import FakeEngine
from tests.support.limits import auth, key_of
from tests.support.metrics import Scrape
from tests.support.paths import BATCH_PROFILE, POLICY
from tests.support.processes import SERVING, START_TIMEOUT, GatewayProcess, gateway_process, pin

pytestmark = pytest.mark.anyio
TYPO = ("action: reject\n        type: boolean", "action: rejct\n        type: boolean")


async def ft_gateway(*args: str, cwd: Path) -> tuple[int, str, str]:
    """Run ``ft-gateway ARGS`` (without blocking the engine in this event loop)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")},
    )
    async with asyncio.timeout(START_TIMEOUT * 3):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class Files:
    """The config, keys and policy files of the gateway under test."""

    def __init__(self, tmp: Path, engine: str) -> None:
        self.tmp = tmp
        self.policy = tmp / "policy.yaml"
        self.original_policy = POLICY.read_text() + BATCH_PROFILE
        self.policy.write_text(self.original_policy)
        self.config = tmp / "config.yaml"
        self.pidfile = tmp / "run" / "gw.pid"
        self.pidfile.parent.mkdir()
        self.settings: dict[str, Any] = {
            "upstream": {"url": engine},
            "policy": "policy.yaml",
            "auth": {"keys_file": "keys.yaml"},
            "server": {"pidfile": str(self.pidfile), "keep_alive_timeout": 600},
            "log": {"requests": False},
            "rate_limits": {"default": {"requests_per_minute": 1000}},
        }
        self.write_config()
        self.write_keys({"alice": None, "bob": None})

    def write_config(self, **changes: Any) -> None:
        self.config.write_text(yaml.safe_dump({**self.settings, **changes}))

    def write_keys(self, keys: dict[str, str | None], *, bad: bool = False) -> None:
        entries = [
            {"name": n, "sha256": "not-a-hash" if bad else hash_key(key_of(n))}
            | ({"profile": p} if p else {})
            for n, p in keys.items()
        ]
        (self.tmp / "keys.yaml").write_text(yaml.safe_dump({"keys": entries}))

    async def reload(self) -> tuple[int, str, str]:
        return await ft_gateway("reload", "--config", str(self.config), cwd=self.tmp)


@contextlib.asynccontextmanager
async def served(tmp_path: Path, *, workers: int) -> AsyncIterator[tuple[Files, GatewayProcess]]:
    """``serve --config`` of fresh ``Files`` in ``tmp_path``, ``workers`` processes, in front
    of a fake engine."""
    async with FakeEngine() as engine:
        files = Files(tmp_path, engine.url)
        async with gateway_process(
            "--config", str(files.config), "--workers", str(workers), tmp=tmp_path
        ) as gateway:
            yield files, gateway


async def statuses(clients: dict[int, httpx.AsyncClient], name: str, **body: Any) -> list[int]:
    """The status each worker answers a chat request of the key ``name`` with."""
    return [
        (await c.post(CHAT, json=chat(**body), headers=auth(name))).status_code
        for c in clients.values()
    ]


async def test_reload_is_all_or_nothing_in_every_worker(tmp_path: Path) -> None:
    async with served(tmp_path, workers=2) as (files, gateway):
        match = await gateway.wait_for_line(SERVING.pattern)
        url, pids = f"http://127.0.0.1:{match[1]}", [int(p) for p in match[3].split(",")]
        assert files.pidfile.read_text() == f"{gateway.process.pid}\n"
        names = sorted(Path(f"/proc/{pid}/comm").read_text().strip() for pid in pids)
        assert names == ["ft-gateway-w0", "ft-gateway-w1"]  # pgrep -x, ps -o comm
        workers = await pin(url, pids)
        try:
            assert await statuses(workers, "bob") == [200, 200]
            assert await statuses(workers, "alice", n=9) == [400, 400]

            # Valid: bob removed, carol added, alice moved to the batch profile.
            files.write_keys({"alice": "batch", "carol": None})
            status, out, err = await files.reload()
            assert (status, err) == (0, "")
            assert out.startswith("ft-gateway reload: reloaded API keys (2 processes, pids")
            assert await statuses(workers, "bob") == [401, 401]
            assert await statuses(workers, "carol") == [200, 200]
            assert await statuses(workers, "alice", n=9) == [200, 200]

            # Invalid, each kind: refused whole, the keys written with it too.
            files.write_keys({"alice": "batch", "carol": None, "dave": None})
            files.policy.write_text(files.original_policy.replace(*TYPO, 1))
            status, _, err = await files.reload()
            assert status == 1
            assert "refused by 2 of 2 processes" in err
            assert "got \"rejct\" (did you mean 'reject'?)" in err
            files.policy.write_text(files.original_policy)

            files.write_keys({"alice": None}, bad=True)
            status, _, err = await files.reload()
            assert status == 1
            assert "keys[0].sha256: must be 64 hexadecimal digits" in err

            files.write_keys({"alice": "batch", "carol": None, "dave": None})
            files.write_config(rate_limits={"keys": {"erin": {"requests_per_minute": 1}}})
            status, _, err = await files.reload()
            assert status == 1
            assert "rate_limits.keys.erin: no API key is named 'erin'" in err

            files.write_config(upstream={"url": "http://127.0.0.1:9"})
            status, _, err = await files.reload()
            assert status == 1
            assert "upstream.url: changes only with a restart" in err

            assert await statuses(workers, "dave") == [401, 401]
            for client in workers.values():
                last = (await client.get("/readyz")).json()["policy"]["last_reload"]
                assert last["result"] == "failed"
                # /readyz needs no key: the reason, not the problem (ft-gateway reload
                # printed it above, from the status files).
                assert "1 problem" in last["error"] and "upstream" not in last["error"]
            m = Scrape((await workers[pids[0]].get("/metrics")).text)
            assert m.total("ft_gateway_policy_reloads_total", result="failed") == 8
            assert m.total("ft_gateway_policy_reloads_total", result="loaded") == 2

            # Erin's key and erin's limits together: one valid reload.
            files.write_keys({"alice": "batch", "carol": None, "erin": None})
            files.write_config(rate_limits={"keys": {"erin": {"requests_per_minute": 1}}})
            status, out, err = await files.reload()
            assert (status, err) == (0, "")
            assert "reloaded API keys, rate limits" in out
            assert await statuses(workers, "erin") == [200, 429]
            assert await statuses(workers, "dave") == [401, 401]
        finally:
            for client in workers.values():
                await client.aclose()

        gateway.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(START_TIMEOUT):
            assert await gateway.process.wait() == 0
    assert list(files.pidfile.parent.iterdir()) == []  # the pidfile and statuses removed
    status, _, err = await files.reload()
    assert status == 2
    assert err == f"ft-gateway reload: no gateway is running: {files.pidfile} does not exist\n"


async def test_one_process_and_a_second_serve_on_the_same_pidfile(tmp_path: Path) -> None:
    async with served(tmp_path, workers=1) as (files, gateway):
        await gateway.wait_for_line("Uvicorn running")
        status, _, err = await ft_gateway(
            "serve", "--config", str(files.config), "--port", "0", cwd=tmp_path
        )
        assert status == 3
        assert f"another gateway (pid {gateway.process.pid}) holds the pidfile" in err

        files.write_keys({"alice": None}, bad=True)
        status, _, err = await files.reload()
        assert status == 1
        assert f"refused by 1 of 1 processes (pids {gateway.process.pid})" in err

        gateway.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(START_TIMEOUT):
            assert await gateway.process.wait() == 0
    assert not files.pidfile.exists()

    # A pidfile left by a gateway that was killed names no live gateway.
    files.pidfile.write_text(f"{os.getpid()}\n")
    status, _, err = await files.reload()
    assert status == 2
    assert "was left by one that has stopped" in err
