"""The ``ft-gateway extproc`` command: the config's policy as an Envoy external
processor (docs/envoy.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.extproc.server import build, refusals, serve_extproc
from gateway.observe.logs import setup_logging
from gateway.settings import config_path, load_settings
from gateway.yamlsource import SourceError

_run: Callable[[Coroutine[Any, Any, None]], None]
try:
    from uvloop import run as _run
except ImportError:  # pragma: no cover - no uvloop on Windows: asyncio's own loop
    _run = asyncio.run


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags (each overrides its config key, as serve's do)."""
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("--host", help="gRPC listen address (extproc.host)")
    p.add_argument("--port", type=int, help="gRPC port (extproc.port; 0: any free one)")
    p.add_argument(
        "--metrics-port", type=int, help="/metrics port (listen.metrics_port, else listen.port)"
    )
    p.add_argument("--policy", help="policy file")
    p.add_argument(
        "--watch", action="store_true", default=None, help="reload the policy when its file changes"
    )
    p.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="least severe lines written (default: info)",
    )
    p.add_argument("--log-format", choices=["json", "text"], help="log lines (default: json)")


def run(args: argparse.Namespace) -> int:
    """Load the settings and policy, then serve the processor until stopped."""
    overrides: dict[tuple[str, ...], Any] = {
        ("extproc", "host"): args.host,
        ("extproc", "port"): args.port,
        ("listen", "metrics_port"): args.metrics_port,
        ("policy",): args.policy,
        ("watch_policy",): args.watch,
        ("log", "format"): args.log_format,
        ("log", "level"): args.log_level,
    }
    try:
        settings = load_settings(config_path(args.config), overrides=overrides)
    except SourceError as exc:
        print(f"ft-gateway extproc: cannot start:\n{exc}", file=sys.stderr)
        return 2
    problems = refusals(settings)
    if problems:
        print("ft-gateway extproc: cannot start:\n" + "\n".join(problems), file=sys.stderr)
        return 2
    try:
        built = build(settings)
    except SourceError as exc:
        print(f"ft-gateway extproc: cannot start:\n{exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log.format, settings.log.level)
    policy = built.state.policy
    logging.getLogger("gateway").info(
        "ft-gateway extproc starting",
        extra={"event": "startup", "mode": "extproc", "path": policy.path, "sha256": policy.digest},
    )
    try:
        # uvloop, as serve runs on: grpc's asyncio server costs a quarter less CPU per
        # request on it (870-1,218 us against 1,341-1,380 us, bench/envoy.py's setup).
        _run(serve_extproc(built))
    except OSError as exc:
        print(f"ft-gateway extproc: cannot start: {exc}", file=sys.stderr)
        return 2
    return 0
