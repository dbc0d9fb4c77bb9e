"""The command line: serve refuses a bad config with file, key path and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main


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
