"""``ft-gateway schema``: the JSON Schema of policy files, for editors and CI."""

from __future__ import annotations

import argparse
import json
import sys

from gateway.policy.schema import policy_schema


def schema_text() -> str:
    """The policy JSON Schema as ``schema`` prints it and gateway/policy.schema.json holds it."""
    return json.dumps(policy_schema(), indent=2, ensure_ascii=False) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print the JSON Schema of policy files."""
    sys.stdout.write(schema_text())
    return 0
