"""The repository's files that tests read: its root, the default policy, the test
fixtures; and the profile that tests add to the default policy."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "ft-serve.yaml"
FIXTURES = ROOT / "tests" / "fixtures"

# Appended to the default policy: a trusted batch client (an API key with profile
# "batch") may ask for several choices, as from an engine that honours n.
BATCH_PROFILE = """
profiles:
  batch:
    routes:
      /v1/chat/completions:
        fields:
          n: {action: pass, maximum: 4}
"""
