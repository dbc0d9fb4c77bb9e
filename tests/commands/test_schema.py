"""The committed JSON Schema of policy files, and the files that point to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gateway.cli import main
from gateway.commands.schema import schema_text
from tests.support.paths import FIXTURES, ROOT

SCHEMA_FILE = ROOT / "gateway" / "policy.schema.json"
POLICIES = sorted((ROOT / "policies").glob("*.yaml"))
SCHEMA_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$", re.MULTILINE)


def validator() -> Any:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_committed_schema_is_the_generated_one() -> None:
    # If this fails: .venv/bin/ft-gateway schema > gateway/policy.schema.json
    assert SCHEMA_FILE.read_text() == schema_text()


def test_schema_command_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == SCHEMA_FILE.read_text()


def test_there_are_policies() -> None:
    assert POLICIES


@pytest.mark.parametrize("path", [*POLICIES, FIXTURES / "policies" / "good-overlays.yaml"], ids=str)
def test_policy_validates_and_points_to_the_schema(path: Path) -> None:
    validator().validate(load(path))
    match = SCHEMA_LINE.search(path.read_text())
    assert match is not None, f"{path} has no yaml-language-server $schema line"
    assert (path.parent / match.group(1)).resolve() == SCHEMA_FILE


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("unknown-action", ["routes", "/v1/chat/completions", "fields", "logprobs", "action"]),
        ("unknown-key", ["routes", "/v1/chat/completions", "fields", "n"]),
        ("wrong-type", ["routes", "/v1/chat/completions", "fields", "model", "required"]),
    ],
)
def test_editor_flags_typos(name: str, where: list[str]) -> None:
    errors = list(validator().iter_errors(load(FIXTURES / "policies" / "broken" / f"{name}.yaml")))
    assert errors
    assert any(list(e.absolute_path)[: len(where)] == where for e in errors)


def test_conditional_keys_and_overlay_patches() -> None:
    v = validator()
    rename = {"routes": {"/v1/completions": {"fields": {"a": {"action": "rename"}}}}}
    assert not v.is_valid(rename)
    default: dict[str, Any] = {
        "routes": {"/v1/completions": {"fields": {"a": {"action": "default"}}}}
    }
    assert not v.is_valid(default)
    default["routes"]["/v1/completions"]["fields"]["a"]["value"] = 1
    assert v.is_valid(default)
    overlay: dict[str, Any] = {
        "routes": {"/v1/completions": {}},
        "models": {"m": {"routes": {"/v1/completions": {"fields": {"n": {"acton": "pass"}}}}}},
    }
    assert not v.is_valid(overlay)
    overlay["models"]["m"]["routes"]["/v1/completions"]["fields"]["n"] = {"action": "pass"}
    assert v.is_valid(overlay)
