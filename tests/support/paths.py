"""Where the repository's files are: its root, the default policy, the test fixtures."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "ft-serve.yaml"
FIXTURES = ROOT / "tests" / "fixtures"
