"""Choosing contenders and building their command lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import contenders, routers
from bench.contenders import BASELINE_ENV, CONTENDERS, PYTHON_ENV, ROOT, Launch, select


def _launch(tmp_path: Path) -> Launch:
    return Launch(upstream="http://127.0.0.1:9000", host="127.0.0.1", port=8080, workdir=tmp_path)


def test_default_selection_leaves_out_the_variants() -> None:
    names = [c.name for c in select(None)]
    assert names[:3] == ["direct", "nginx", "naive"]
    assert "gateway-aiohttp" not in names


def test_selection_keeps_the_table_order() -> None:
    assert [c.name for c in select(["naive", "direct"])] == ["direct", "naive"]
    with pytest.raises(ValueError, match="unknown contender"):
        select(["haproxy"])


def test_command_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BASELINE_ENV, str(tmp_path / "before"))
    monkeypatch.setattr(routers, "router_binary", lambda name: f"/cache/{name}")  # no install
    monkeypatch.setenv(PYTHON_ENV, "/usr/bin/python3.11")
    made: list[tuple[str, ...]] = []

    def python_env(*args: str) -> str:
        made.append(args)
        return "/cache/env/bin/python"

    monkeypatch.setattr(contenders, "installed", python_env)  # no environment made
    commands = {c.name: c.command(_launch(tmp_path)) for c in CONTENDERS if c.command}
    # This checkout's gateway, first on the path of the other interpreter's environment.
    argv, env = commands["gateway-python"]
    assert made == [("python-env", "/usr/bin/python3.11")]
    assert argv[:2] == ["/cache/env/bin/python", "-c"] and argv[3:5] == [str(ROOT), "serve"]
    assert argv[argv.index("--upstream") + 1] == "http://127.0.0.1:9000" and env == {}
    argv, env = commands["naive"]
    assert "bench.naive_proxy:create_app" in argv
    assert env == {"NAIVE_UPSTREAM": "http://127.0.0.1:9000"}
    argv, env = commands["gateway-aiohttp"]
    assert argv[1:2] == ["serve"]
    assert argv[argv.index("--upstream") + 1] == "http://127.0.0.1:9000"
    assert env == {"FT_GATEWAY_UPSTREAM__CLIENT": "aiohttp"}
    argv, env = commands["gateway-baseline"]
    # The other checkout's gateway, imported before this one's, in this venv, with
    # that checkout's config when it has one.
    assert argv[1] == "-c" and argv[3] == str(tmp_path / "before") and argv[4] == "serve"
    assert env == {}
    (tmp_path / "before").mkdir()
    (tmp_path / "before" / "config.yaml").write_text("{}\n")
    command = next(c for c in CONTENDERS if c.name == "gateway-baseline").command
    assert command is not None
    argv, _ = command(_launch(tmp_path))
    assert argv[argv.index("--config") + 1] == str(tmp_path / "before" / "config.yaml")
    argv, _ = commands["nginx"]
    assert "server 127.0.0.1:9000;" in (tmp_path / "nginx.conf").read_text()
    argv, _ = commands["envoy-extproc"]
    assert argv[1:3] == ["-m", "bench.envoy"] and argv[-1] == "--extproc"
    assert commands["smg"][0][:2] == ["/cache/smg", "launch"]


def test_the_baseline_is_available_only_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BASELINE_ENV, raising=False)
    with pytest.raises(ValueError, match="not available"):
        select(["gateway-baseline"])
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "cli.py").write_text("")
    monkeypatch.setenv(BASELINE_ENV, str(tmp_path))
    assert [c.name for c in select(["gateway-baseline"])] == ["gateway-baseline"]


def test_the_other_interpreter_is_available_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PYTHON_ENV, raising=False)
    with pytest.raises(ValueError, match="not available"):
        select(["gateway-python"])
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "python3"))
    with pytest.raises(ValueError, match="not available"):
        select(["gateway-python"])
    (tmp_path / "python3").write_text("")
    assert [c.name for c in select(["gateway-python"])] == ["gateway-python"]
