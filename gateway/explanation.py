"""``ft-gateway explain``: what the policy does to one request, field by field.

It runs the server's own steps (``parse_request``, ``apply_policy``,
``request_content``), so it cannot disagree with what a client gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.policy import Outcome, Policy, apply_policy
from gateway.proxy import parse_request, request_content

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
            "error": orjson.loads(self.error) if self.error is not None else None,
        }


def guess_route(raw: bytes) -> str:
    """The route a request body is meant for: completions if it has a prompt and no messages."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "/v1/chat/completions"
    if isinstance(data, dict) and "prompt" in data and "messages" not in data:
        return "/v1/completions"
    return "/v1/chat/completions"


def explain_request(
    policy: Policy, raw: bytes, *, route: str | None = None, profile: str | None = None
) -> Explanation:
    """Run ``raw`` (a request body) through the server's parsing and policy steps."""
    route = route or guess_route(raw)
    result = Explanation(route=route)
    try:
        body = parse_request(raw, _JSON_HEADERS)
        decision = apply_policy(policy, route, body, profile=profile, trace=True)
        result.outcomes = decision.outcomes
        if decision.error is not None:
            raise decision.error
    except GatewayError as exc:
        result.status = exc.status
        result.error = orjson.dumps(exc.openai_error())
        return result
    result.forwarded = request_content(raw, decision)
    result.changed = decision.changed
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
        lines.append(f"-> forwarded to the engine ({how}):")
        lines.append((result.forwarded or b"").decode(errors="replace").rstrip())
    return "\n".join(lines) + "\n"
