"""The Rust routers as contenders: their command lines, the script that installs them and
the path it prints (the routers themselves are installed only by scripts/bench)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import routers, tools
from bench.contenders import CONTENDERS, Launch, select
from tests.support.paths import ROOT


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("name", sorted(routers.ROUTERS))
def test_a_router_is_a_plain_round_robin_router_in_front_of_the_engine(name: str) -> None:
    argv = routers.router_command(
        name,
        host="127.0.0.1",
        port=8080,
        upstream="http://127.0.0.1:9000",
        metrics_port=9100,
        binary=f"/opt/{name}",
    )
    assert argv[0] == f"/opt/{name}"
    assert (_flag(argv, "--host"), _flag(argv, "--port")) == ("127.0.0.1", "8080")
    assert _flag(argv, "--worker-urls") == "http://127.0.0.1:9000"
    assert _flag(argv, "--policy") == "round_robin"
    # Its metrics on a port of the run's own, on loopback (neither can switch them off).
    assert (_flag(argv, "--prometheus-host"), _flag(argv, "--prometheus-port")) == (
        "127.0.0.1",
        "9100",
    )
    assert "--workers" not in argv and "--worker-threads" not in argv  # pinned: one thread


def test_health_checks_are_off_where_a_router_allows_it() -> None:
    smg = routers.router_command(
        "smg", host="h", port=1, upstream="http://e:2", metrics_port=3, binary="smg"
    )
    assert smg[1] == "launch" and "--disable-health-check" in smg
    assert "--disable-tokenizer-autoload" in smg and "--disable-load-monitoring" in smg
    vllm = routers.router_command(
        "vllm-router", host="h", port=1, upstream="http://e:2", metrics_port=3, binary="v"
    )
    assert _flag(vllm, "--health-check-interval-secs") == "86400"  # a day apart: no switch


def test_the_routers_run_by_default_and_install_before_the_first_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [c.name for c in select(None)]
    assert names == ["direct", "nginx", "naive", "envoy", "vllm-router", "smg", "gateway"]
    monkeypatch.setattr(routers, "router_binary", lambda name: f"/cache/{name}")
    launch = Launch("http://127.0.0.1:9000", "127.0.0.1", 8080, tmp_path)
    for contender in CONTENDERS:
        if contender.name in routers.ROUTERS:
            assert contender.prepare is not None and contender.command is not None
            argv, env = contender.command(launch)
            assert argv[0] == f"/cache/{contender.name}" and env == {}
            # A metrics port of its own for each run, never the routers' shared default.
            assert _flag(argv, "--prometheus-port") != "29000"


def _script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


def test_installed_is_the_last_line_an_install_script_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(tmp_path, "thing", 'echo "installing $1..."\necho "/cache/thing-$1/bin/thing"\n')
    _script(tmp_path, "broken", 'echo "no wheel for this machine" >&2\nexit 1\n')
    monkeypatch.setattr(tools, "SCRIPTS", tmp_path)
    tools.installed.cache_clear()
    try:
        assert tools.installed("thing", "1.2") == "/cache/thing-1.2/bin/thing"
        with pytest.raises(RuntimeError, match="scripts/broken x failed:\nno wheel"):
            tools.installed("broken", "x")
    finally:
        tools.installed.cache_clear()


def test_the_install_script_names_the_routers_it_knows() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "router"), "haproxy"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "unknown router haproxy (vllm-router, smg)" in done.stderr
    for name in routers.ROUTERS:
        assert f"  {name})" in (ROOT / "scripts" / "router").read_text()
