"""The command line: serve refuses a bad config with file, key path and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main


def test_serve_with_a_bad_config_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("listen:\n  port: 8080\ntimeouts:\n  conect: 3\n")
    assert main(["serve", "--config", str(config)]) == 2
    assert f"{config}:4: timeouts.conect: unknown key" in capsys.readouterr().err


def test_serve_with_a_bad_policy_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("routes:\n  /v1/chat/completions:\n    fields:\n      n: {action: rejct}\n")
    assert main(["serve", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert f"{policy}:4: routes./v1/chat/completions.fields.n.action" in err
