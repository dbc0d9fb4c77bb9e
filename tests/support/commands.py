"""A one-shot ``ft-gateway`` command (``test``, ``diff`` ...) run as CI runs it, and a
config file that ``check`` and ``serve`` must both refuse.

(tests/support/processes.py starts ``ft-gateway serve``, which runs until stopped.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import POLICY, ROOT

ENGINE_KEY_ENV = "FT_TEST_ENGINE_KEY"


def ft_gateway(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as CI runs it: a process of its own, its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def config_naming_an_unset_engine_key(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file whose ``upstream.api_key_env`` (line 3) names ``ENGINE_KEY_ENV``, a
    variable this test's environment does not set."""
    monkeypatch.delenv(ENGINE_KEY_ENV, raising=False)
    path = directory / "gw.yaml"
    path.write_text(f"policy: {POLICY}\nupstream:\n  api_key_env: {ENGINE_KEY_ENV}\n")
    return path
