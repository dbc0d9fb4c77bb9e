"""``check`` reports limits that could never apply, the server refuses to start with them,
and ``explain --key`` shows a key's limits, where each comes from, and what a request
reserves."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.app.factory import create_app
from gateway.cli import main
from gateway.yamlsource import SourceError
from tests.support.limits import limited_settings, policy_with_profiles, write_keys

LIMITS: dict[str, Any] = {
    "default": {"requests_per_minute": 60, "concurrent_requests": 8},
    "profiles": {"batch": {"tokens_per_minute": 100000, "tokens_per_day": 5000000}},
    "keys": {"nightly": {"requests_per_minute": 5}},
}


def config(tmp_path: Path, limits: dict[str, Any], *, keys: bool = True) -> Path:
    data: dict[str, Any] = {
        "policy": str(policy_with_profiles(tmp_path, "batch")),
        "rate_limits": limits,
    }
    if keys:
        data["auth"] = {"keys_file": str(write_keys(tmp_path, {"alice": None, "nightly": "batch"}))}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_check_accepts_good_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, "check", "--config", str(config(tmp_path, LIMITS)))
    assert status == 0, out


def test_check_names_limits_that_never_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limits = {**LIMITS, "profiles": {"ghost": {"requests_per_minute": 1}}, "keys": {"nobody": {}}}
    status, out = run(capsys, "check", "--config", str(config(tmp_path, limits)))
    assert status == 1
    assert "rate_limits.profiles.ghost: profile 'ghost' is not defined" in out
    assert "rate_limits.keys.nobody: no API key is named 'nobody'" in out
    status, out = run(capsys, "check", "--config", str(config(tmp_path, LIMITS, keys=False)))
    assert status == 1
    assert "rate_limits.profiles: API keys are off" in out
    assert "rate_limits.keys: API keys are off" in out


def test_check_reports_a_bad_limit_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limits = {"default": {"requests_per_minute": 0}, "store": "memcached"}
    status, out = run(capsys, "check", "--config", str(config(tmp_path, limits)))
    assert status == 1
    assert "rate_limits.default.requests_per_minute" in out and "rate_limits.store" in out


def test_the_server_refuses_to_start_with_a_limit_for_no_key(tmp_path: Path) -> None:
    settings = limited_settings("http://127.0.0.1:9", tmp_path, {"keys": {"bob": {}}})
    with pytest.raises(SourceError, match="no API key is named 'bob'"):
        create_app(settings)


def test_explain_shows_the_limits_of_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config(tmp_path, LIMITS)
    request = tmp_path / "request.json"
    request.write_text(
        '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 1, "max_tokens": 100}'
    )
    monkeypatch.chdir(tmp_path)
    status, out = run(capsys, "explain", "--config", str(path), "--key", "nightly", str(request))
    assert status == 0, out
    assert "rate limits of key 'nightly' (profile batch), counted in the local store:" in out
    assert "requests_per_minute  5         from rate_limits.keys.nightly" in out
    assert "tokens_per_minute    100000    from rate_limits.profiles.batch" in out
    assert "concurrent_requests  8         from rate_limits.default" in out
    size = os.path.getsize(request)
    assert f"this request reserves {-(-size // 4) + 100} tokens until it ends" in out
    status, out = run(
        capsys, "explain", "--json", "--config", str(path), "--key", "alice", str(request)
    )
    data = json.loads(out)
    assert data["rate_limits"][2].split() == ["tokens_per_minute", "-"]
    status, out = run(capsys, "explain", "--config", str(path), "--key", "zed", str(request))
    assert status == 2 and "no API key is named 'zed'" in out
