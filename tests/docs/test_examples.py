"""Every YAML example of the documentation loads the way the gateway would load it:
policies (whole, overlays, or a route's field rules) through the policy checks,
configs as Settings, API key files as keys; a diff edits the default policy into
one that still loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.access.keys import read_keys_file
from gateway.commands.cases import check_case
from gateway.policy.cases import read_cases
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from gateway.settings import Settings, load_settings
from gateway.yamlsource import SourceError, parse_yaml
from tests.docs.markdown import PAGES, ROOT, Block, blocks

DEFAULT_POLICY = ROOT / "policies" / "ft-serve.yaml"
YAML = [b for page in PAGES for b in blocks(page) if b.lang in ("yaml", "yml")]
DIFFS = [b for page in PAGES for b in blocks(page) if b.lang == "diff"]


def kind(data: Any) -> str:
    """What a YAML example is, by its top-level keys."""
    if data is None:
        return "comment"
    if not isinstance(data, dict):
        return "unknown"
    keys = set(data)
    if "routes" in keys:
        return "policy"
    if keys <= {"models", "profiles"}:
        return "overlay"
    if keys == {"keys"}:
        return "keys"
    if "cases" in keys:
        return "cases"
    if keys <= set(Settings.model_fields):
        return "config"
    if all(isinstance(v, dict) and "action" in v for v in data.values()):
        return "rules"
    return "unknown"


def _load(block: Block) -> Any:
    return yaml.safe_load(block.text)


def _check_policy(text: str, where: str) -> None:
    try:
        parse_policy_text(text, file=where)
    except SourceError as exc:
        pytest.fail(f"{where}: the example policy does not load:\n{exc}")


def _default_policy_with(extra: dict[str, Any]) -> str:
    data = yaml.safe_load(DEFAULT_POLICY.read_text(encoding="utf-8"))
    data.update(extra)
    return yaml.safe_dump(data, sort_keys=False)


def test_the_pages_have_examples_of_each_kind() -> None:
    kinds = [kind(_load(b)) for b in YAML]
    for expected in ("policy", "overlay", "keys", "config", "rules"):
        assert expected in kinds, f"no {expected} example left: this test checks nothing there"
    assert DIFFS


@pytest.mark.parametrize("block", YAML, ids=lambda b: b.where)
def test_yaml_example_loads(block: Block, tmp_path: Path) -> None:
    data = _load(block)
    what = kind(data)
    if what == "comment":
        return
    if what == "policy":
        _check_policy(block.text, block.where)
    elif what == "overlay":
        # An overlay is checked laid over the default policy's routes, as serve would.
        _check_policy(_default_policy_with(data), block.where)
    elif what == "rules":
        _check_policy(
            yaml.safe_dump({"routes": {"/v1/chat/completions": {"fields": data}}}), block.where
        )
    elif what == "cases":
        # A case file: it loads, and its cases pass against the default policy.
        cases = read_cases(parse_yaml(block.text, file=block.where))
        policy = Policy(load_policy_file(DEFAULT_POLICY)[0])
        assert [check_case(policy, case) for case in cases.cases] == [None] * len(cases.cases)
    elif what == "keys":
        try:
            read_keys_file(parse_yaml(block.text, file=block.where))
        except SourceError as exc:
            pytest.fail(f"{block.where}: the example keys file does not load:\n{exc}")
    elif what == "config":
        config = tmp_path / "config.yaml"
        config.write_text(block.text, encoding="utf-8")
        try:
            load_settings(config, environ={})
        except SourceError as exc:
            pytest.fail(f"{block.where}: the example config does not load:\n{exc}")
    else:
        pytest.fail(
            f"{block.where}: a YAML example that is neither a policy, an overlay, field "
            f"rules, a keys file nor a config: {sorted(data) if isinstance(data, dict) else data}"
        )


def test_repository_config_loads() -> None:
    # config.yaml is the reference the configuration page points to.
    settings = load_settings(ROOT / "config.yaml", environ={})
    defaults = load_settings(None, environ={}).model_copy(update={"policy": settings.policy})
    # store.path is unset in both: the state directory's file (docs/responses.md).
    assert settings.store.path is None and defaults.store.path is None
    # Paths given in a config file are relative to it; the defaults, to the working directory.
    assert settings.capture.path == ROOT / defaults.capture.path
    defaults.capture = defaults.capture.model_copy(update={"path": settings.capture.path})
    assert settings.model_dump() == defaults.model_dump()  # (not where each was read from)


def _sides(block: Block) -> tuple[str, str]:
    before, after = [], []
    for line in block.text.splitlines():
        mark, rest = line[:1], line[1:]
        if mark in (" ", "-"):
            before.append(rest)
        if mark in (" ", "+"):
            after.append(rest)
        if mark not in (" ", "-", "+"):
            pytest.fail(f"{block.where}: not a diff line: {line!r}")
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


@pytest.mark.parametrize("block", DIFFS, ids=lambda b: b.where)
def test_diff_example_edits_the_default_policy(block: Block) -> None:
    before, after = _sides(block)
    policy = DEFAULT_POLICY.read_text(encoding="utf-8")
    assert policy.count(before) == 1, (
        f"{block.where}: the lines the diff changes are not (once) in {DEFAULT_POLICY.name}"
    )
    _check_policy(policy.replace(before, after), block.where)
