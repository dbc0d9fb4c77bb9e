"""The probe judges ``model`` itself (does the engine refuse a name it does not serve?),
and probes one deployment of a fleet by its name in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.probe.checks import MODEL
from gateway.probe.route import CHAT
from gateway.probe.verdict import IGNORED
from gateway.probe.writer import render_policy
from refengine.server import create_app as create_engine
from tests.support.probes import run_probe, verdict
from tests.support.servers import ServerThread, free_port
from tests.support.toyengine import ToyEngine


def test_an_engine_that_answers_any_name_is_found_ignoring_model() -> None:
    result = run_probe(ToyEngine(ignore={"model"}))
    assert verdict(result, CHAT, MODEL).outcome == IGNORED
    written = " ".join(render_policy(result).split())
    assert "answers a name it does not serve: the gateway refuses the names" in written


def test_a_deployment_is_probed_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "code.yaml"
    with ServerThread(create_engine(model_name="beta")) as engine:
        config = tmp_path / "config.yaml"
        config.write_text(
            "deployments:\n"
            f"  - {{name: chat, upstream: {{url: 'http://127.0.0.1:{free_port()}'}}, "
            "models: [alpha]}\n"
            f"  - {{name: code, upstream: {{url: '{engine.url}'}}, models: [beta]}}\n"
        )
        args = ["--deployment", "code", "--config", str(config), "--route", "chat"]
        assert main(["probe", *args, "--out", str(out)]) == 0
    written = out.read_text()
    assert "(model beta)" in " ".join(written.split())
    assert "This engine refuses a name it does not serve." in " ".join(written.split())
    assert main(["probe", "--deployment", "coder", "--config", str(config)]) == 2
    assert "no deployment is named 'coder' (the config has ['chat', 'code'])" in (
        capsys.readouterr().err
    )
