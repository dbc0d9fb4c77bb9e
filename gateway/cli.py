"""The ``ft-gateway`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from gateway import __version__
from gateway.policycommands import add_policy_commands, config_path
from gateway.yamlsource import SourceError


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the gateway")
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("--upstream", help="engine base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--host", help="listen address")
    p.add_argument("--port", type=int, help="listen port")
    p.add_argument("--policy", help="policy file")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", choices=["json", "text"], help="log lines (default: json)")
    p.add_argument(
        "--watch", action="store_true", default=None, help="reload the policy when its file changes"
    )
    p.add_argument(
        "--workers",
        type=int,
        help="worker processes on the one port (default: the CPUs this process may use)",
    )


def _add_probe(sub: Any) -> None:
    from gateway.probe.command import add_arguments

    add_arguments(
        sub.add_parser("probe", help="measure which fields an engine honours; write a policy")
    )


def probe(args: argparse.Namespace) -> int:
    """Probe an engine (see gateway/probe/)."""
    from gateway.probe.command import run

    return run(args)


def serve(args: argparse.Namespace) -> int:
    """Load settings and policy, then run uvicorn until stopped."""
    from gateway.app import create_app
    from gateway.server import run_server
    from gateway.settings import load_settings
    from gateway.workers import available_cpus, serve_workers

    overrides = {
        ("upstream", "url"): args.upstream,
        ("listen", "host"): args.host,
        ("listen", "port"): args.port,
        ("policy",): args.policy,
        ("watch_policy",): args.watch,
        ("log", "format"): args.log_format,
    }
    workers = args.workers if args.workers is not None else available_cpus()
    if workers < 1:
        print("ft-gateway: --workers must be at least 1", file=sys.stderr)
        return 2
    try:
        settings = load_settings(config_path(args.config), overrides=overrides)
        app = create_app(settings)
    except SourceError as exc:
        print(f"ft-gateway: cannot start:\n{exc}", file=sys.stderr)
        return 2
    if workers > 1:
        return serve_workers(settings, workers=workers, log_level=args.log_level)
    run_server(app, settings, log_level=args.log_level)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ft-gateway", description="OpenAI-compatibility gateway with a field policy"
    )
    parser.add_argument("--version", action="version", version=f"ft-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_probe(sub)
    commands = {"serve": serve, "probe": probe, **add_policy_commands(sub)}
    args = parser.parse_args(argv)
    return commands[args.command](args)


if __name__ == "__main__":  # pragma: no cover - python -m gateway.cli
    sys.exit(main())
