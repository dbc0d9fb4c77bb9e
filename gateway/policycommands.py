"""The policy commands of ``ft-gateway``: ``check``, ``explain`` and ``schema``.

None of them starts a server; ``explain`` and ``check`` run the same loading and
policy code as ``serve``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.checker import check_files, display_path, format_report
from gateway.policyfile import policy_schema

Command = Callable[[argparse.Namespace], int]


def config_path(arg: str | None) -> str | None:
    """The config file: the flag, else ``$FT_GATEWAY_CONFIG``, else ./config.yaml if present."""
    if arg:
        return arg
    env = os.environ.get("FT_GATEWAY_CONFIG")
    if env:
        return env
    return "config.yaml" if os.path.exists("config.yaml") else None


def check(args: argparse.Namespace) -> int:
    """Print every problem in the config and policy files; 1 if any, else 0."""
    config = config_path(args.config) if args.config or not args.policies else None
    results = check_files(config, args.policies, environ=os.environ)
    text, status = format_report(results)
    sys.stdout.write(text)
    return status


def explain(args: argparse.Namespace) -> int:
    """Print what the policy does to one request; 0 if it would be forwarded, 1 if rejected."""
    from gateway.explanation import explain_request, format_explanation
    from gateway.policy import Policy
    from gateway.policyfile import load_policy_file
    from gateway.settings import load_settings
    from gateway.yamlsource import SourceError

    try:
        if args.policy:
            path = Path(args.policy)
        else:
            path = load_settings(config_path(args.config)).policy
        source, digest = load_policy_file(path)
        policy = Policy(source, digest=digest, path=display_path(args.policy or path))
        stdin = args.request in (None, "-")
        raw = sys.stdin.buffer.read() if stdin else Path(args.request).read_bytes()
    except SourceError as exc:
        print(f"ft-gateway explain: cannot load the policy:\n{exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ft-gateway explain: cannot read {args.request}: {exc.strerror}", file=sys.stderr)
        return 2
    result = explain_request(policy, raw, route=args.route, profile=args.profile)
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(format_explanation(result, policy))
    return 0 if result.error is None else 1


def schema_text() -> str:
    """The policy JSON Schema as ``schema`` prints it and gateway/policy.schema.json holds it."""
    return json.dumps(policy_schema(), indent=2, ensure_ascii=False) + "\n"


def schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of policy files."""
    sys.stdout.write(schema_text())
    return 0


def add_policy_commands(sub: Any) -> dict[str, Command]:
    """Register ``check``, ``explain`` and ``schema`` on the CLI's subparsers."""
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
        choices=["/v1/chat/completions", "/v1/completions"],
        help="default: completions if the body has 'prompt' and no 'messages'",
    )
    p.add_argument("--profile", help="apply this API-key profile's overlay")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    sub.add_parser("schema", help="print the JSON Schema of policy files")
    return {"check": check, "explain": explain, "schema": schema}
