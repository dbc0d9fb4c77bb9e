"""A one-shot ``ft-gateway`` command (``test``, ``diff`` ...) run as CI runs it.

(tests/support/processes.py starts ``ft-gateway serve``, which runs until stopped.)"""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


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
