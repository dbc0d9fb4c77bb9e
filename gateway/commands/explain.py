"""``ft-gateway explain``: what the policy does to one request, field by field.

It runs the server's own steps (``parse_request``, ``apply_policy``,
``request_content``), so it cannot disagree with what a client gets.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gateway import routes
from gateway.access.keys import load_keyring
from gateway.commands.check import display_path
from gateway.deployments import Deployment, find_model
from gateway.errors import GatewayError, ModelNotFound, render
from gateway.errorshapes import error_shape
from gateway.jsonbody.parse import parse_request, request_content
from gateway.limits.limiter import reservation
from gateway.limits.report import describe_limits
from gateway.policy.engine import STEPS, Outcome, Policy, apply_policy
from gateway.policy.file import PolicyFile
from gateway.policy.loading import load_policy_file
from gateway.schemas.expect import OFF, Expectation
from gateway.settings import Settings, config_path, load_settings
from gateway.yamlsource import Problem, SourceError

_JSON_HEADERS = [(b"content-type", b"application/json")]


@dataclass
class Explanation:
    """The policy's answer for one request, as ``explain`` shows it."""

    route: str
    outcomes: list[Outcome] = field(default_factory=list)
    status: int = 200
    forwarded: bytes | None = None  # what the engine would receive
    changed: bool = False
    error: bytes | None = None  # the exact error body the client would get
    refusal: GatewayError | None = None  # the error itself (its param and code)
    fanout: int = 1  # n served by fan-out: the engine is asked this many times
    limits: list[str] = field(default_factory=list)  # the key's rate limits (--key)
    reserved: int | None = None  # the tokens this request reserves against them
    reported: tuple[Outcome, ...] = ()  # what report-only rules would refuse
    report: bytes | None = None  # the error body the client would get were they enforced
    answer: list[str] = field(default_factory=list)  # what its answer will be checked for

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``explain --json``)."""
        return {
            "route": self.route,
            "fields": [
                {"field": o.field, "outcome": o.action, "detail": o.detail} for o in self.outcomes
            ],
            "status": self.status,
            "forwarded": orjson.loads(self.forwarded) if self.forwarded is not None else None,
            "changed": self.changed,
            "fanout": self.fanout,
            "error": orjson.loads(self.error) if self.error is not None else None,
            "rate_limits": self.limits,
            "reserved_tokens": self.reserved,
            "reported": [{"field": o.field, "code": o.detail} for o in self.reported],
            "report": orjson.loads(self.report) if self.report is not None else None,
            "answer_checks": self.answer,
        }


def guess_route(raw: bytes) -> str:
    """The route a request body is meant for (the routes' table decides, by its fields)."""
    try:
        return routes.guess_route(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return routes.CHAT


def explain_request(
    policy: Policy, raw: bytes, *, route: str | None = None, profile: str | None = None
) -> Explanation:
    """Run ``raw`` (a request body) through the server's parsing and policy steps."""
    route = route or guess_route(raw)
    result = Explanation(route=route)
    shape = error_shape(route)
    try:
        body = parse_request(raw, _JSON_HEADERS)
        decision = apply_policy(policy, route, body, profile=profile, trace=True)
        # Listed in the order the steps apply (docs/policy.md): checks, strip, rename, default.
        result.outcomes = sorted(decision.outcomes, key=lambda o: STEPS.get(o.action, 0))
        result.reported = decision.reported
        if decision.report is not None:
            result.report = render(decision.report.error, shape=shape)
        if decision.error is not None:
            raise decision.error
    except GatewayError as exc:
        result.refusal = exc
        result.status = shape.status(exc)
        result.error = render(exc, shape=shape)
        return result
    result.forwarded = request_content(raw, decision)
    result.changed = decision.changed
    result.fanout = decision.fanout
    if decision.expect is not None:
        result.answer = answer_checks(decision.expect)
    return result


def format_explanation(result: Explanation, policy: Policy) -> str:
    """The human-readable report."""
    lines = [
        f"POST {result.route}   policy {policy.path or '<policy>'} (sha256 {policy.digest[:12]})"
    ]
    width = max((len(o.field) for o in result.outcomes), default=0)
    for o in result.outcomes:
        lines.append(f"  {o.field:<{width}}  {o.action:<9}  {o.detail}".rstrip())
    if not result.outcomes and result.error is None:
        lines.append("  (no fields)")
    if result.error is not None:
        lines.append(f"-> HTTP {result.status} to the client, the engine is not called:")
        lines.append(result.error.decode())
    else:
        how = "changed by the policy" if result.changed else "unchanged, the client's own bytes"
        if result.fanout > 1:
            how += f"; sent {result.fanout} times, the answers merged into one"
        lines.append(f"-> forwarded to the engine ({how}):")
        lines.append((result.forwarded or b"").decode(errors="replace").rstrip())
    if result.report is not None:
        lines.append("report-only rules would refuse (not enforced):")
        width = max(len(o.field) for o in result.reported)
        lines.extend(f"  {o.field:<{width}}  {o.detail}" for o in result.reported)
        lines.append("-> were they enforced, HTTP 400 to the client:")
        lines.append(result.report.decode())
    if result.answer:
        lines.append("the answer will be checked (answers: in the policy):")
        lines.extend(f"  {line}" for line in result.answer)
    lines.extend(result.limits)
    if result.limits and result.reserved is not None:
        lines.append(f"  this request reserves {result.reserved} tokens until it ends")
    return "\n".join(lines) + "\n"


def answer_checks(expect: Expectation) -> list[str]:
    """What the answer to a request is checked for, one line a check (``explain``)."""
    answers = expect.answers
    found = []
    if expect.schema is not None:
        found.append(f"schema ({answers.schema}): the content against {expect.schema_param}")
    if expect.tools and answers.tool_arguments != OFF:
        names = ", ".join(sorted(expect.tools))
        found.append(f"tool_arguments ({answers.tool_arguments}): each call's arguments ({names})")
    if expect.choice is not None:
        asked = "a call" if expect.choice == "required" else f"a call of '{expect.choice}'"
        found.append(f"tool_choice ({answers.tool_choice}): {asked}")
    if expect.single:
        found.append(f"parallel_tool_calls ({answers.parallel_tool_calls}): one call at most")
    return found


def _with_model(raw: bytes, model: str) -> bytes:
    """``raw`` with its ``model`` set (a body that is no JSON object is left to the parser)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    return orjson.dumps({**body, "model": model}) if isinstance(body, dict) else raw


def _profile_of(settings: Settings, name: str, source: PolicyFile) -> str | None:
    """The profile of the API key ``name`` (SourceError if there is no such key)."""
    auth = settings.auth
    keyring = load_keyring(auth.keys_file, auth.keys_env, profiles=source.profiles)
    for key in keyring.keys:
        if key.name == name:
            return key.profile
    raise SourceError([Problem("--key", 0, (), f"no API key is named '{name}'")])


def run(args: argparse.Namespace) -> int:
    """Print what the policy does to one request; 0 if it would be forwarded, 1 if rejected."""
    settings: Settings | None = None
    profile = args.profile
    try:
        if args.key or not args.policy or args.model:
            settings = load_settings(config_path(args.config))
        path = Path(args.policy) if args.policy else settings.policy if settings else Path()
        stdin = args.request in (None, "-")
        raw = sys.stdin.buffer.read() if stdin else Path(args.request).read_bytes()
        routed: tuple[Deployment, str] | None = None
        if args.model and settings is not None and settings.deployments:
            routed = find_model(settings.deployments, args.model)
            if routed is None:
                sys.stdout.write(f"model {args.model}: no deployment serves it\n-> HTTP 404:\n")
                shape = error_shape(args.route or guess_route(raw))
                sys.stdout.write(render(ModelNotFound(args.model), shape=shape).decode() + "\n")
                return 1
            if not args.policy and routed[0].policy is not None:
                path = routed[0].policy
        if args.model:
            raw = _with_model(raw, routed[1] if routed is not None else args.model)
        if args.key and settings is not None:
            profile = profile or _profile_of(settings, args.key, load_policy_file(path)[0])
        source, digest = load_policy_file(path)
        policy = Policy(source, digest=digest, path=display_path(args.policy or path))
    except SourceError as exc:
        print(f"ft-gateway explain: cannot load the policy:\n{exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ft-gateway explain: cannot read {args.request}: {exc.strerror}", file=sys.stderr)
        return 2
    result = explain_request(policy, raw, route=args.route, profile=profile)
    if args.key and settings is not None and settings.rate_limits.enabled:
        config = settings.rate_limits
        result.limits = describe_limits(config, args.key, profile)
        if result.error is None and result.forwarded is not None:
            body = orjson.loads(result.forwarded)
            result.reserved = reservation(
                body,
                body_bytes=len(raw),
                default_max_tokens=config.default_max_tokens,
                n=result.fanout,
                fields=routes.ROUTES[result.route].max_tokens,
            )
    if args.json:
        shown = result.as_dict()
        if routed is not None:
            shown["deployment"] = {"name": routed[0].name, "served_model": routed[1]}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
    else:
        if routed is not None:
            deployment, served = routed
            sys.stdout.write(
                f"model {args.model}: deployment {deployment.name} "
                f"({', '.join(deployment.upstream.replicas)}), served as {served}\n"
            )
        sys.stdout.write(format_explanation(result, policy))
    return 0 if result.error is None else 1
