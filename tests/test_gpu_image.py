"""scripts/gpu-test runs on the GPU machine, whose image has pytest, numpy, torch and triton
but none of the gateway's dependencies: the suite's set-up (tests/conftest.py and the
plugins it loads) must import none of them, or the GPU tests do not even start.

The test runs the script itself (collection only) in an interpreter without site-packages,
given a copy of this environment's site-packages as links, less every distribution the
gateway and its tests depend on (read from pyproject.toml, so a new dependency is left out
too): the GPU image, as near as this machine can make it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the GPU image has of the project's dependencies.
ON_THE_GPU_IMAGE = {"pytest", "numpy"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gateway_distributions() -> set[str]:
    """The distributions pyproject.toml names (runtime and test), less the GPU image's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    names = {_canonical(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in requirements}
    return names - ON_THE_GPU_IMAGE


def _without(distributions: set[str], into: Path) -> None:
    """Link every entry of site-packages into ``into`` but those of ``distributions``
    (their files, by their RECORD) and the .pth files (the editable gateway among them)."""
    left_out: set[str] = set()
    for dist in metadata.distributions():
        if _canonical(dist.metadata["Name"]) in distributions:
            left_out.update(f.parts[0] for f in dist.files or () if f.parts[0] != "..")
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.name not in left_out and entry.suffix != ".pth":
            (into / entry.name).symlink_to(entry)


def test_gpu_test_collects_without_the_gateways_dependencies(tmp_path: Path) -> None:
    packages = tmp_path / "site"
    packages.mkdir()
    distributions = gateway_distributions()
    assert {"uvicorn", "httpx", "starlette", "redis", "hypothesis"} <= distributions
    _without(distributions, packages)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "PYTHON": str(python), "PYTHONPATH": str(packages)}
    # The environment is what it claims: the gateway's dependencies cannot be imported.
    for module in ("uvicorn", "httpx", "starlette", "yaml", "redis"):
        probe = subprocess.run(
            [python, "-c", f"import {module}"], env=env, capture_output=True, check=False
        )
        assert probe.returncode != 0, f"{module} is importable"
    done = subprocess.run(
        ["bash", "scripts/gpu-test", "--no-bench", "--collect-only", "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Each module is collected, or skips itself once imported (no CUDA device for the GPU
    # module; no triton where its CPU install failed): either way its imports ran.
    for module in ("tests/sampler/test_triton_sampler.py", "tests/sampler/gpu/test_triton_gpu.py"):
        assert f"{module}::" in done.stdout or f"SKIPPED [1] {module}:" in done.stdout, module
