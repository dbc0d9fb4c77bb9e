"""``ft-gateway probe``: measure which fields an engine honours; print, report, write a policy."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gateway.policy.cases import render_cases
from gateway.policy.engine import Policy
from gateway.policy.loading import parse_policy_text
from gateway.probe.cases import cases_path, probe_cases
from gateway.probe.client import EngineClient
from gateway.probe.clients import judge_clients, report_lines
from gateway.probe.context import ProbeError
from gateway.probe.keywords import SAMPLES as KEYWORD_SAMPLES
from gateway.probe.progress import Progress
from gateway.probe.report import render_markdown, render_table
from gateway.probe.responses import RESPONSES
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import planned_requests, probe_engine
from gateway.probe.writer import SEED_CHOICES, render_policy
from gateway.routes import EMBEDDINGS, MESSAGES, RERANK
from gateway.settings import config_path, load_settings
from gateway.yamlsource import SourceError

ROUTES = {
    "chat": [CHAT],
    "completions": [COMPLETIONS],
    "both": [CHAT, COMPLETIONS],
    "responses": [CHAT, RESPONSES],
    # Anthropic's Messages API: its rules follow the chat route's unless the engine
    # serves /v1/messages itself (vLLM, llama.cpp's server).
    "messages": [CHAT, MESSAGES],
    "all": [CHAT, COMPLETIONS, RESPONSES, MESSAGES],
    # An embedding or rerank model is its own deployment: --model names it.
    "embeddings": [EMBEDDINGS],
    "rerank": [RERANK],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's flags."""
    parser.add_argument("--upstream", help="engine base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="the model name the engine serves")
    parser.add_argument(
        "--deployment",
        help="probe this deployment of the config (--config): its first replica, its first "
        "model and its engine key, unless --upstream, --model or --api-key-env say otherwise",
    )
    parser.add_argument("--config", help="config file naming the deployments")
    parser.add_argument(
        "--route",
        choices=sorted(ROUTES),
        default="all",
        help="all: chat, completions, /v1/responses and /v1/messages (whose rules follow "
        "the chat route's verdicts unless the engine serves them natively); embeddings, "
        "rerank: those of an embedding or rerank model",
    )
    parser.add_argument("--out", type=Path, help="write the policy the findings call for here")
    parser.add_argument("--report", type=Path, help="write the findings as Markdown here")
    parser.add_argument(
        "--extra",
        default="{}",
        help='JSON object added to every request, e.g. \'{"chat_template_kwargs": '
        '{"enable_thinking": false}}\'',
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument(
        "--max-requests",
        type=int,
        default=None,
        help="request budget (default: the most the probe of the routes sends; with JSON "
        "mode honoured, its schema keywords take about 500)",
    )
    parser.add_argument(
        "--keyword-samples",
        type=int,
        default=KEYWORD_SAMPLES,
        help="answers per JSON-Schema keyword case (its control takes half as many); fewer "
        "is quicker and less sure",
    )
    parser.add_argument(
        "--seed-under-load",
        choices=SEED_CHOICES,
        default="pass",
        help="a seed the engine reproduces only for a request alone: pass it (best effort, "
        "as OpenAI's own seed) or write a 400 with the reason",
    )
    parser.add_argument(
        "--api-key-env", help="name of the environment variable holding the engine's API key"
    )


def _extra(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--extra is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError("--extra must be a JSON object")
    return value


def _from_deployment(args: argparse.Namespace) -> None:
    """Fill --upstream, --model and --api-key-env from the deployment --deployment names."""
    try:
        settings = load_settings(config_path(args.config))
    except SourceError as exc:
        raise ValueError(f"cannot load the config:\n{exc}") from exc
    for deployment in settings.deployments:
        if deployment.name == args.deployment:
            upstream = deployment.upstream
            args.upstream = args.upstream or upstream.replicas[0]
            args.model = args.model or deployment.models[0]
            args.api_key_env = args.api_key_env or upstream.api_key_env
            return
    names = [d.name for d in settings.deployments]
    raise ValueError(f"no deployment is named {args.deployment!r} (the config has {names})")


def _check_target(path: Path | None, flag: str) -> None:
    if path is not None and not path.resolve().parent.is_dir():
        raise ValueError(f"{flag}: no such directory: {path.parent}")


def run(args: argparse.Namespace) -> int:
    """Probe, print the table, write the files asked for. 2 on bad input or a mute engine."""
    try:
        if args.deployment is not None:
            _from_deployment(args)
        if args.upstream is None or args.model is None:
            raise ValueError("give --upstream and --model, or --deployment NAME")
        extra = _extra(args.extra)
        if not args.upstream.startswith(("http://", "https://")):
            raise ValueError(f"--upstream must be an http(s) URL, got {args.upstream!r}")
        if args.timeout <= 0 or (args.max_requests is not None and args.max_requests < 1):
            raise ValueError("--timeout and --max-requests must be positive")
        if args.keyword_samples < 1:
            raise ValueError("--keyword-samples must be positive")
        _check_target(args.out, "--out")
        _check_target(args.report, "--report")
    except ValueError as exc:
        print(f"ft-gateway probe: {exc}", file=sys.stderr)
        return 2
    routes = ROUTES[args.route]
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    plan = planned_requests(routes, keyword_samples=args.keyword_samples)
    budget = plan if args.max_requests is None else args.max_requests
    progress = Progress(min(plan, budget))
    client = EngineClient(
        args.upstream,
        api_key=api_key,
        timeout=args.timeout,
        max_requests=budget,
        on_request=lambda: progress.update(done=client.sent),
    )
    try:
        with client:
            result = probe_engine(
                client,
                upstream=args.upstream,
                model=args.model,
                routes=routes,
                extra=extra,
                progress=progress,
                keyword_samples=args.keyword_samples,
            )
    except ProbeError as exc:
        progress.close()
        print(f"ft-gateway probe: {exc}", file=sys.stderr)
        return 2
    progress.close()
    print(render_table(result))
    if result.responses is not None:
        judged = Policy(parse_policy_text(render_policy(result), file="<written policy>"))
        print("\n".join(report_lines(judge_clients(judged))))
    if args.report is not None:
        args.report.write_text(render_markdown(result), encoding="utf-8")
        print(f"report written to {args.report}", file=sys.stderr)
    if args.out is not None:
        schema = Path(__file__).resolve().parent.parent / "policy.schema.json"
        text = render_policy(
            result,
            schema=os.path.relpath(schema, args.out.resolve().parent),
            seed_under_load=args.seed_under_load,
        )
        try:
            written = parse_policy_text(text, file=str(args.out))
        except SourceError as exc:  # pragma: no cover - a writer bug, not an engine's
            print(f"ft-gateway probe: the written policy does not check:\n{exc}", file=sys.stderr)
            return 1
        args.out.write_text(text, encoding="utf-8")
        print(f"policy written to {args.out}", file=sys.stderr)
        cases = cases_path(args.out)
        found = probe_cases(result, client.bodies, Policy(written))
        header = (
            f"# The probe's own requests to {args.upstream} ({args.model}), each with the "
            f"verdict {args.out.name} gives it.\n# Run: ft-gateway test {args.out} {cases}\n"
        )
        cases.write_text(header + render_cases(found), encoding="utf-8")
        print(f"{len(found)} test cases written to {cases}", file=sys.stderr)
    return 0
