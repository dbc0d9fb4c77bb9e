"""The processor reuses the pure parts and reaches into no proxy; it refuses at start
what it cannot do; its command line is the one documented."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from tests.support.paths import POLICY, ROOT

# What serve's HTTP data plane is made of: none of it is loaded by the processor.
PROXY_ONLY = (
    "gateway.proxy",
    "gateway.responses",
    "gateway.app.factory",
    "gateway.app.dispatch",
    "gateway.serving",
    "gateway.upstream.factory",
    "gateway.upstream.balancer",
    "gateway.upstream.httptools_impl",
    "gateway.upstream.httptools_connection",
)


def test_the_processor_imports_no_part_of_the_proxy() -> None:
    program = (
        "import json, sys, gateway.extproc.command, gateway.extproc.server; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gateway.'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(done.stdout)
    assert [m for m in loaded if m.startswith(PROXY_ONLY)] == []
    # The pure parts it shares with serve.
    for shared in (
        "gateway.policy.engine",
        "gateway.routes",
        "gateway.deployments",
        "gateway.errors",
        "gateway.jsonbody.parse",
        "gateway.app.reload",
        "gateway.observe.observers",
    ):
        assert shared in loaded


def test_rate_limits_are_refused_at_start_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {POLICY}\nrate_limits: {{default: {{requests_per_minute: 10}}}}\n")
    assert main(["extproc", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "rate_limits" in err and "does not see" in err


def test_an_invalid_policy_stops_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("routes: [no]\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {policy}\n")
    assert main(["extproc", "--config", str(config), "--port", "0", "--metrics-port", "0"]) == 2
    assert "policy.yaml" in capsys.readouterr().err
