"""The programs the project's scripts install outside its venv (Envoy, the Rust routers,
helm, schemas): each script installs once and prints the path, which the bench and the
tests ask for."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@functools.cache
def installed(script: str, *args: str) -> str:
    """The path ``scripts/SCRIPT ARGS...`` prints once it has installed its program (once
    per machine); RuntimeError with its output if it cannot."""
    done = subprocess.run(
        [str(SCRIPTS / script), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/{' '.join([script, *args])} failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]
