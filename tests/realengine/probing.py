"""``ft-gateway probe`` against a real engine, run as a user runs it, and what it wrote:
the report (Markdown), the policy, and beside them the engine's name and version (JSON),
which scripts/real-engines turns into docs/engines.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gateway.app.factory import create_app
from tests.realengine.engines import MODEL_NAME, Running
from tests.support.gateways import gateway_settings
from tests.support.servers import ServerThread

PROBE_TIMEOUT = 1800  # seconds for the whole probe of one engine, on a loaded machine


@dataclass(frozen=True)
class Probed:
    """What ``ft-gateway probe`` wrote for one engine, and what it printed."""

    engine: str
    version: str
    policy: Path
    report: Path
    output: str
    returncode: int

    @property
    def rules(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self.policy.read_text())
        return loaded

    def action(self, route: str, field: str) -> str | None:
        """The written policy's action on top-level ``field`` of ``route`` (None: no rule)."""
        rule = self.rules["routes"].get(route, {}).get("fields", {}).get(field)
        return None if rule is None else str(rule.get("action", "pass"))

    @property
    def messages_native(self) -> bool:
        """Whether the probe found the engine serving /v1/messages itself."""
        return "/v1/messages: served natively" in self.output

    @property
    def responses_native(self) -> bool:
        """Whether the probe found the engine serving /v1/responses itself."""
        return "/v1/responses: served natively" in self.output


def probe(served: Running, out_dir: Path, route: str = "all") -> Probed:
    """Probe ``served`` on ``route`` (``all``: chat, completions, responses, messages), writing
    ``<engine>.report.md``, ``.policy.yaml``, ``.probe.txt`` (what it printed) and ``.json``
    (the engine, its version, the model); for another route ``<engine>.<route>.report.md``
    and so on, beside them."""
    name = served.engine.name
    stem = name if route == "all" else f"{name}.{route}"
    policy, report = out_dir / f"{stem}.policy.yaml", out_dir / f"{stem}.report.md"
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "gateway", "probe", "--upstream", served.url, "--model", MODEL_NAME),
            *("--route", route, "--out", str(policy), "--report", str(report)),
            *("--timeout", "120"),
            # Fewer answers per keyword case on a loaded machine (scripts/real-engines).
            *("--keyword-samples", os.environ.get("FT_REAL_ENGINES_KEYWORD_SAMPLES", "8")),
        ],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT,
        check=False,
    )
    output = done.stdout + done.stderr
    if route == "all":
        about = {
            "engine": name,
            "version": served.engine.version,
            "model": os.environ.get("FT_REAL_ENGINES_MODEL_NAME", served.engine.model.name),
            "model_sha256": os.environ.get("FT_REAL_ENGINES_MODEL_SHA256", ""),
        }
        (out_dir / f"{name}.json").write_text(json.dumps(about, indent=2) + "\n")
    (out_dir / f"{stem}.probe.txt").write_text(output)
    return Probed(name, served.engine.version, policy, report, output, done.returncode)


def serve_gateway(upstream: str, policy: Path, **overrides: Any) -> ServerThread:
    """The gateway with ``policy`` in front of ``upstream`` on a thread of its own;
    ``overrides`` as settings paths with ``__``: ``upstream__responses="native"``."""
    flags = {tuple(k.split("__")): v for k, v in overrides.items()}
    return ServerThread(create_app(gateway_settings(upstream, policy=policy, overrides=flags)))


def assert_check_passes(policy: Path) -> None:
    """``ft-gateway check`` accepts the policy the probe wrote."""
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check", str(policy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
