"""The ``ft-gateway`` command line."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gateway import __version__
from gateway.app.factory import create_app
from gateway.commands import batches, cases, check, diff, explain, reload, schema
from gateway.extproc import command as extproc_command
from gateway.observe.interpreter import slow_build_warning, this_interpreter
from gateway.observe.logs import setup_logging
from gateway.observe.startup import startup_record
from gateway.probe import command as probe_command
from gateway.routes import ROUTE_NAMES
from gateway.serving.pidfile import PidfileBusy, serving_pidfile
from gateway.serving.server import run_server
from gateway.serving.workers import available_cpus, serve_workers
from gateway.settings import config_path, load_settings
from gateway.yamlsource import SourceError

Command = Callable[[argparse.Namespace], int]


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the gateway")
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("--upstream", help="engine base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--host", help="listen address")
    p.add_argument("--port", type=int, help="listen port")
    p.add_argument("--policy", help="policy file")
    p.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="least severe lines written (default: info)",
    )
    p.add_argument("--log-format", choices=["json", "text"], help="log lines (default: json)")
    p.add_argument(
        "--watch", action="store_true", default=None, help="reload the policy when its file changes"
    )
    p.add_argument(
        "--store-path",
        help="the response store's SQLite file (default: $XDG_STATE_HOME/ft-gateway/"
        "responses.sqlite3)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="worker processes on the one port (default: the CPUs this process may use)",
    )


def _add_extproc(sub: Any) -> None:
    extproc_command.add_arguments(
        sub.add_parser(
            "extproc",
            help="run the policy as an Envoy external processor (gRPC ext_proc)",
            description="The config's policy, route table and fleet, answering Envoy's "
            "ext_proc streams on extproc.port, with the gRPC health protocol there and "
            "/metrics on listen.metrics_port (else listen.port). Exit 2 if the files are "
            "invalid or the config asks for what a processor cannot do.",
        )
    )


def _add_probe(sub: Any) -> None:
    probe_command.add_arguments(
        sub.add_parser("probe", help="measure which fields an engine honours; write a policy")
    )


def _add_policy_commands(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="validate config and policy files without starting anything",
        description="Print every problem as FILE:LINE: KEY.PATH: MESSAGE; exit 1 if any. "
        "With no arguments, checks the config serve would use and the policy it names.",
    )
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("policies", nargs="*", metavar="POLICY", help="policy files to check")

    p = sub.add_parser(
        "explain",
        help="show what the policy does to one request",
        description="Exit 0 if the request would be forwarded, 1 if the client would get an "
        "error, 2 if the policy or the request file cannot be read.",
    )
    p.add_argument(
        "request", nargs="?", metavar="REQUEST.json", help="request body (- or none: stdin)"
    )
    p.add_argument("--policy", help="policy file (default: the one the config names)")
    p.add_argument("--config", help="config file naming the policy")
    p.add_argument(
        "--route",
        choices=ROUTE_NAMES,
        help="default: guessed from the body (completions for 'prompt', embeddings for "
        "'encoding_format', responses for 'input', rerank for 'documents', chat for 'messages')",
    )
    p.add_argument(
        "--model",
        help="the request's model: with deployments in the config, explain as the deployment "
        "serving it (its policy, the name its engine gets)",
    )
    p.add_argument("--profile", help="apply this API-key profile's overlay")
    p.add_argument(
        "--key", help="the API key name: its profile's overlay, and its rate limits (config)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")

    sub.add_parser("schema", help="print the JSON Schema of policy files")

    cases.add_arguments(
        sub.add_parser(
            "test",
            help="run a policy's test cases (request bodies and the verdicts they must get)",
            description="Exit 0 if every case passes, 1 if one fails (each failure printed "
            "as FAIL FILE:LINE: ...), 2 if the policy or a case file cannot be read.",
        )
    )
    diff.add_arguments(
        sub.add_parser(
            "diff",
            help="compare two policies by their effect, not their text",
            description="Per route and field: which values move between pass, reject, strip, "
            "rename, default and fan-out; neutral values, ranges, enums; overlays. With "
            "--bodies, how many recorded requests change verdict. Exit 0 if the policies "
            "have the same effect, 1 if they differ, 2 if a file cannot be read.",
        )
    )
    reload.add_arguments(
        sub.add_parser(
            "reload",
            help="reload the running gateway's policy, API keys and limits; wait for the result",
            description="Signal the gateway that holds the pidfile (server.pidfile, else "
            "ft-gateway-PORT.pid in $XDG_RUNTIME_DIR/ft-gateway or the state directory) and "
            "wait for every worker's result. Exit 0 if reloaded, 1 if refused (nothing changed; "
            "the reasons are printed), 2 if no gateway answered.",
        )
    )


def _add_batches(sub: Any) -> None:
    batches.add_arguments(
        sub.add_parser(
            "batches",
            help="list or cancel the Batch API's batches (docs/batches.md)",
            description="Read the batch store the config names (no gateway needs to run). "
            "Exit 0 done, 1 no such batch or one that has ended, 2 the config or store "
            "cannot be read.",
        )
    )


def serve(args: argparse.Namespace) -> int:
    """Load settings and policy, then run uvicorn until stopped."""
    overrides = {
        ("upstream", "url"): args.upstream,
        ("listen", "host"): args.host,
        ("listen", "port"): args.port,
        ("policy",): args.policy,
        ("watch_policy",): args.watch,
        ("store", "path"): args.store_path,
        ("log", "format"): args.log_format,
        ("log", "level"): args.log_level,
    }
    workers = args.workers if args.workers is not None else available_cpus()
    if workers < 1:
        print("ft-gateway: --workers must be at least 1", file=sys.stderr)
        return 2
    try:
        settings = load_settings(config_path(args.config), overrides=overrides)
    except SourceError as exc:
        # Before the log stream starts: a person at a terminal reads this.
        print(f"ft-gateway: cannot start:\n{exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log.format, settings.log.level)
    with contextlib.ExitStack() as stack:
        try:
            # Before the app is built: its reloader writes its status beside the pidfile.
            settings.server.pidfile = stack.enter_context(serving_pidfile(settings))
        except PidfileBusy as exc:
            print(f"ft-gateway: cannot start: {exc}", file=sys.stderr)
            return 3
        try:
            app = create_app(settings)
        except SourceError as exc:
            print(f"ft-gateway: cannot start:\n{exc}", file=sys.stderr)
            return 2
        record = startup_record(
            settings, app.state.gateway.policy, key_count=app.state.key_count, workers=workers
        )
        logger = logging.getLogger("gateway")
        logger.info("ft-gateway starting", extra=record)
        warning = slow_build_warning(this_interpreter())
        if warning is not None:
            logger.warning(warning)
        if workers > 1:
            return serve_workers(settings, workers=workers, log_level=settings.log.level)
        # uvicorn re-raises the SIGTERM it drained on: exit through this block (the
        # pidfile removed) rather than die by the signal.
        signal.signal(signal.SIGTERM, _exit_drained)
        run_server(app, settings, log_level=settings.log.level)
    return 0


def _exit_drained(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ft-gateway", description="OpenAI-compatibility gateway with a field policy"
    )
    parser.add_argument("--version", action="version", version=f"ft-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_extproc(sub)
    _add_probe(sub)
    _add_policy_commands(sub)
    _add_batches(sub)
    commands: dict[str, Command] = {
        "serve": serve,
        "extproc": extproc_command.run,
        "probe": probe_command.run,
        "check": check.run,
        "explain": explain.run,
        "schema": schema.run,
        "test": cases.run,
        "diff": diff.run,
        "reload": reload.run,
        "batches": batches.run,
    }
    args = parser.parse_args(argv)
    return commands[args.command](args)


if __name__ == "__main__":  # pragma: no cover - python -m gateway.cli
    sys.exit(main())
