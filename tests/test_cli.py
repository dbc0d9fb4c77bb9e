"""The command line: serve refuses a bad config with file, key path and line, and an
unset engine key variable; it leaves no pidfile behind; it starts with no arguments
at all from any directory."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
from pathlib import Path

import httpx
import pytest

from gateway.cli import main
from gateway.settings import SHIPPED_POLICY
from tests.docs.markdown import blocks
from tests.support.commands import config_naming_an_unset_engine_key
from tests.support.paths import POLICY, ROOT
from tests.support.processes import START_TIMEOUT, spawned


@pytest.fixture(autouse=True)
def own_pidfile_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's pidfile in this test's directory, not beside another gateway's."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))


@pytest.mark.parametrize(
    ("flag", "text", "problem"),
    [
        pytest.param(
            "--config",
            "listen:\n  port: 8080\ntimeouts:\n  conect: 3\n",
            ":4: timeouts.conect: unknown key",
            id="config",
        ),
        pytest.param(
            "--policy",
            "routes:\n  /v1/chat/completions:\n    fields:\n      n: {action: rejct}\n",
            ":4: routes./v1/chat/completions.fields.n.action",
            id="policy",
        ),
    ],
)
def test_serve_with_a_bad_file_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, text: str, problem: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["serve", flag, str(path)]) == 2
    assert f"{path}{problem}" in capsys.readouterr().err
    # No pidfile left (its private directory in the runtime directory may stay, empty).
    left = [p for p in tmp_path.iterdir() if p != path]
    assert all(p.name == "ft-gateway" and not any(p.iterdir()) for p in left), left


@pytest.mark.anyio
async def test_bare_serve_from_an_empty_directory_uses_the_shipped_policy(tmp_path: Path) -> None:
    """``ft-gateway serve`` with no arguments, far from the repository, starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    env.update(FT_GATEWAY_PORT="0", TMPDIR=str(tmp_path))  # a free port; else all defaults
    async with spawned("serve", env=env, cwd=tmp_path) as gateway:
        match = await gateway.wait_for_line(r"(?:serving on|running on) http://127\.0\.0\.1:(\d+)")
        async with httpx.AsyncClient(timeout=30) as client:
            ready = (await client.get(f"http://127.0.0.1:{match[1]}/readyz")).json()
        assert ready["policy"]["sha256"] == hashlib.sha256(POLICY.read_bytes()).hexdigest()
        assert "path" not in ready["policy"]  # (/readyz shows no file path: SECURITY.md)
        gateway.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(START_TIMEOUT):
            assert await gateway.process.wait() == 0


def test_the_docs_small_config_passes_check_outside_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = ROOT / "docs" / "configuration.md"
    (small,) = [b for b in blocks(page) if b.lang == "yaml" and "api_key_env: ENGINE_KEY" in b.text]
    config = tmp_path / "config.yaml"
    config.write_text(small.text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGINE_KEY", "sk-engine")
    for name in [n for n in os.environ if n.startswith("FT_GATEWAY_")]:
        monkeypatch.delenv(name)
    assert main(["check", "--config", "config.yaml"]) == 0, capsys.readouterr()
    assert str(SHIPPED_POLICY) in capsys.readouterr().out


def test_serve_refuses_an_unset_engine_key_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config_naming_an_unset_engine_key(tmp_path, monkeypatch)
    assert main(["serve", "--config", str(path)]) == 2
    assert f"{path}:3: upstream.api_key_env: variable FT_TEST_ENGINE_KEY is not set" in (
        capsys.readouterr().err
    )
