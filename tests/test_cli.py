"""The command line: serve refuses a bad config with file, key path and line, and an
unset engine key variable; it leaves no pidfile behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from tests.support.paths import POLICY


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
    assert list(tmp_path.iterdir()) == [path]


def test_serve_refuses_an_unset_engine_key_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FT_TEST_ENGINE_KEY", raising=False)
    path = tmp_path / "gw.yaml"
    path.write_text(f"policy: {POLICY}\nupstream:\n  api_key_env: FT_TEST_ENGINE_KEY\n")
    assert main(["serve", "--config", str(path)]) == 2
    assert f"{path}:3: upstream.api_key_env: variable FT_TEST_ENGINE_KEY is not set" in (
        capsys.readouterr().err
    )
