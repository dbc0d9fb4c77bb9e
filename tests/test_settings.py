"""Config loading: defaults, flags over file, environment over both, errors with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import SHIPPED_POLICY, load_settings
from gateway.yamlsource import SourceError, parse_yaml
from tests.support.configs import refused_config
from tests.support.paths import POLICY, ROOT


def test_shipped_config_is_the_defaults() -> None:
    settings = load_settings(ROOT / "config.yaml", environ={})
    assert settings.upstream.url == "http://127.0.0.1:8000"
    assert settings.listen.port == 8080
    assert settings.policy == POLICY


def test_flags_override_file_and_env_overrides_flags(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("listen: {port: 9000}\nupstream: {url: 'http://127.0.0.1:1'}\n")
    settings = load_settings(
        config,
        overrides={("listen", "port"): 9001, ("upstream", "url"): "http://127.0.0.1:2"},
        environ={"FT_GATEWAY_PORT": "9002", "FT_GATEWAY_TIMEOUTS__CONNECT": "1.5"},
    )
    assert settings.listen.port == 9002
    assert settings.upstream.url == "http://127.0.0.1:2"
    assert settings.timeouts.connect == 1.5


def test_relative_paths_are_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "sub" / "gw.yaml"
    config.parent.mkdir()
    config.write_text(
        "policy: p.yaml\nauth: {keys_file: keys.yaml}\n"
        "store: {backend: sqlite, path: data/responses.sqlite3}\n"
    )
    monkeypatch.chdir(tmp_path)  # not the config file's folder
    settings = load_settings(config, environ={})
    here = tmp_path / "sub"
    assert settings.policy == here / "p.yaml"
    assert settings.auth.keys_file == here / "keys.yaml"
    assert settings.store.path == here / "data" / "responses.sqlite3"
    # A flag or variable is relative to the working directory, as a shell user expects.
    flagged = load_settings(
        config,
        overrides={("policy",): "q.yaml"},
        environ={"FT_GATEWAY_STORE__PATH": "r.sqlite3"},
    )
    assert flagged.policy == Path("q.yaml")
    assert flagged.store.path == Path("r.sqlite3")


def test_the_default_policy_is_the_installed_one(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("log: {format: text}\n")
    for settings in (load_settings(config, environ={}), load_settings(None, environ={})):
        assert settings.policy == SHIPPED_POLICY
        assert settings.policy.is_absolute()
        assert settings.policy.read_bytes() == POLICY.read_bytes()


def test_the_log_level_is_a_key_a_variable_and_a_flag(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("log: {level: warning}\n")
    assert load_settings(None, environ={}).log.level == "info"
    assert load_settings(config, environ={}).log.level == "warning"
    assert load_settings(config, environ={"FT_GATEWAY_LOG_LEVEL": "debug"}).log.level == "debug"
    flagged = load_settings(config, overrides={("log", "level"): "error"}, environ={})
    assert flagged.log.level == "error"
    with pytest.raises(SourceError, match=r"environment:0: log.level: Input should be"):
        load_settings(config, environ={"FT_GATEWAY_LOG__LEVEL": "loud"})


def test_a_variable_can_hold_a_list(tmp_path: Path) -> None:
    config = tmp_path / "gw.yaml"
    config.write_text("upstream:\n  url: http://127.0.0.1:8000\n")
    urls = '["http://127.0.0.1:8001", "http://127.0.0.1:8002"]'
    settings = load_settings(config, environ={"FT_GATEWAY_UPSTREAM__URLS": urls})
    assert settings.upstream.replicas == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    # The comma-separated form still works.
    environ = {"FT_GATEWAY_UPSTREAM__URLS": "http://127.0.0.1:8001,http://127.0.0.1:8002"}
    assert load_settings(config, environ=environ).upstream.replicas == settings.upstream.replicas


@pytest.mark.parametrize(
    "environ",
    [
        {"FT_GATEWAY_UPSTREAM__URLS": '["ftp://127.0.0.1:8001"]'},
        {"FT_GATEWAY_UPSTREAM__URLS": "[]"},
        {"FT_GATEWAY_UPSTREAM__URLS": "{a: 1}"},
        {"FT_GATEWAY_UPSTREAM": "http://127.0.0.1:8001/v1, ftp://x"},
    ],
)
def test_a_bad_variable_is_blamed_not_the_file(tmp_path: Path, environ: dict[str, str]) -> None:
    error = refused_config(tmp_path, "upstream:\n  url: http://127.0.0.1:8000\n", environ=environ)
    assert all(p.file == "environment" for p in error.problems), str(error)


def test_the_response_store_is_sqlite_by_default_and_its_path_follows_file_flag_env(
    tmp_path: Path,
) -> None:
    store = load_settings(ROOT / "config.yaml", environ={}).store
    assert (store.backend, store.path) == ("sqlite", None)  # the state directory's file
    config = tmp_path / "sub" / "gw.yaml"
    config.parent.mkdir()
    config.write_text("store: {path: r.db}\n")
    assert load_settings(config, environ={}).store.path == tmp_path / "sub" / "r.db"
    flag = load_settings(config, overrides={("store", "path"): "flag.db"}, environ={})
    assert flag.store.path == Path("flag.db")  # as given, like every flag
    env = load_settings(config, environ={"FT_GATEWAY_STORE__PATH": "/srv/env.db"})
    assert env.store.path == Path("/srv/env.db")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("listen:\n  port: abc\n", ":2: listen.port: Input should be a valid integer"),
        ("listen:\n  prot: 1\n", ":2: listen.prot: unknown key"),
        ("timeouts:\n  connect: -1\n", ":2: timeouts.connect: Input should be greater than 0"),
        ("upstream:\n  url: ftp://x\n", ":2: upstream.url: String should match pattern"),
        (
            "listen: {port: 1}\nlisten: {port: 2}\n",
            ":2: listen: duplicate key (first defined on line 1)",
        ),
        ("listen: [\n", ":2: (top level): invalid YAML"),
        ("- 1\n", ":1: (top level): a config file must be a mapping"),
    ],
)
def test_bad_config_names_file_key_and_line(tmp_path: Path, text: str, expected: str) -> None:
    assert f"{tmp_path / 'gw.yaml'}{expected}" in str(refused_config(tmp_path, text))


def test_bad_environment_value_names_the_environment() -> None:
    with pytest.raises(SourceError, match=r"environment:0: listen.port"):
        load_settings(None, environ={"FT_GATEWAY_PORT": "eighty"})


def test_missing_config_file() -> None:
    with pytest.raises(SourceError, match="cannot read file"):
        load_settings("/nonexistent/gw.yaml", environ={})


def test_upstream_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_KEY", "sk-engine")
    settings = load_settings(None, environ={"FT_GATEWAY_UPSTREAM__API_KEY_ENV": "ENGINE_KEY"})
    assert settings.upstream_api_key() == "sk-engine"


def test_yaml_lines_are_recorded() -> None:
    doc = parse_yaml("a:\n  b:\n    - x\n    - y: 1\n", file="f")
    assert doc.line_of(("a", "b", 1, "y")) == 4
    assert doc.line_of(("a", "b", 0)) == 3
    assert doc.line_of(("a", "missing")) == 1
