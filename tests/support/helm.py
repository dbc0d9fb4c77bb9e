"""Helm (installed from npm by scripts/helm) on deploy/helm/ft-gateway: the chart linted
and rendered with a values file, each rendered object as a dict."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

from bench.tools import installed
from tests.support.paths import ROOT

CHART = ROOT / "deploy" / "helm" / "ft-gateway"
EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))


def helm_binary() -> str:
    """The helm scripts/helm installs (once per machine); fails loudly if it cannot."""
    return installed("helm")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` on the chart's directory, its output kept."""
    return subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, check=False, cwd=CHART
    )


@functools.cache
def render(values: Path | None = None, *sets: str) -> tuple[dict[str, Any], ...]:
    """The objects ``helm template ft-gateway`` renders with ``values`` (None: the
    chart's defaults) and ``--set`` pairs ``sets``."""
    args = ["template", "ft-gateway", ".", "--namespace", "llm"]
    if values is not None:
        args += ["-f", str(values)]
    for pair in sets:
        args += ["--set", pair]
    done = helm(*args)
    if done.returncode != 0:
        raise AssertionError(f"helm template failed:\n{done.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def find(objects: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (and ``name``) among ``objects``."""
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]
