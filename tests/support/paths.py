"""The repository's files that tests read: its root, the default policy, the test
fixtures; the profile that tests add to the default policy, and the file that does it
(``policy_with``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "ft-serve.yaml"
FIXTURES = ROOT / "tests" / "fixtures"

# Appended to the default policy: a trusted batch client (an API key with profile
# "batch") may ask for more choices per request than the default maximum of 8 (n is
# served by fan-out: each choice is one more request to the engine).
BATCH_PROFILE = """
profiles:
  batch:
    routes:
      /v1/chat/completions:
        fields:
          n: {maximum: 16}
"""


def policy_with(directory: Path, text: str) -> Path:
    """``directory/policy.yaml``: the default policy with ``text`` (YAML) appended."""
    path = directory / "policy.yaml"
    path.write_text(POLICY.read_text() + text)
    return path
