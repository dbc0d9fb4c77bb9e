"""``ft-gateway explain --model``: which deployment a request would reach, under which
name, and what that deployment's policy does to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli import main
from tests.support.fleet import policy_rejecting_seed
from tests.support.paths import POLICY


def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    strict = policy_rejecting_seed(tmp_path)
    path.write_text(
        f"""\
policy: {POLICY}
deployments:
  - name: chat
    upstream: {{urls: ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]}}
    models: [alpha]
    aliases: {{gpt-4o-mini: alpha}}
  - name: code
    upstream: {{url: "http://127.0.0.1:9003"}}
    policy: {strict}
    models: [beta]
"""
    )
    return path


def explain(
    tmp_path: Path, model: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"model": "x", "messages": [{"role": "user", "content": "Hi"}], "seed": 1})
    )
    status = main(
        ["explain", "--config", str(config(tmp_path)), "--model", model, *extra, str(request)]
    )
    return status, capsys.readouterr().out


def test_an_alias_is_explained_as_its_deployment_and_served_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = explain(tmp_path, "gpt-4o-mini", capsys)
    assert status == 0, out
    first = out.splitlines()[0]
    assert first == (
        "model gpt-4o-mini: deployment chat (http://127.0.0.1:9001, http://127.0.0.1:9002), "
        "served as alpha"
    )
    assert '"model":"alpha"' in out


def test_the_deployments_own_policy_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = explain(tmp_path, "beta", capsys, "--json")
    assert status == 1
    shown = json.loads(out)
    assert shown["deployment"] == {"name": "code", "served_model": "beta"}
    assert shown["error"]["error"]["param"] == "seed"


def test_an_unknown_model_is_the_404_a_client_would_get(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = explain(tmp_path, "gpt-5", capsys)
    assert status == 1
    assert out.splitlines()[0] == "model gpt-5: no deployment serves it"
    assert json.loads(out.splitlines()[2])["error"]["code"] == "model_not_found"
