"""SECURITY.md names the test of each promise: every ``tests/...py::name`` it names is a
test function of that file (a renamed or removed test fails here, not silently)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_test_security_md_names_exists() -> None:
    named = _NAMED.findall((ROOT / "SECURITY.md").read_text())
    assert len(named) >= 30, "SECURITY.md names the test of each promise"
    missing = []
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text())
        functions = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        if name not in functions:
            missing.append(f"{path}::{name}")
    assert not missing, missing
