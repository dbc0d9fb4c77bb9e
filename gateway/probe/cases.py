"""The case file the probe writes beside its policy (``ft-gateway test``): each
distinct request it sent, named by the fields it tried and the probe's verdict on
them, with the verdict the written policy gives it. A later edit of that policy
that changes one of these verdicts shows in ``ft-gateway test``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.policy.cases import CHANGED, REFUSED, UNCHANGED, Case, Expected
from gateway.policy.engine import Policy, apply_policy
from gateway.probe.route import CHAT_PROMPT
from gateway.probe.runner import ProbeResult

# What every probe request carries: not what it tries.
_BASE = {"model", "messages", "prompt", "input", "max_tokens", "max_output_tokens"}
# The messages of every chat request but those that check inside messages.
_PLAIN: Any = {"role": "user", "content": CHAT_PROMPT}


def cases_path(policy: Path) -> Path:
    """``candidate.yaml`` -> ``candidate.cases.yaml``, beside it."""
    return policy.with_name(f"{policy.stem}.cases{policy.suffix or '.yaml'}")


def _name(route: str, body: dict[str, Any], extra: dict[str, Any], result: ProbeResult) -> str:
    tried = [k for k in body if k not in _BASE and k not in extra]
    found = result.route(route)
    said = []
    for key in tried:
        verdict = found.verdict(key) if found is not None else None
        value = json.dumps(body[key], separators=(",", ":"))
        value = value if len(value) <= 40 else value[:37] + "..."
        said.append(f"{key}={value}" + (f" ({verdict.outcome})" if verdict is not None else ""))
    messages = body.get("messages")
    if isinstance(messages, list) and messages != [_PLAIN]:
        said.append(f"messages [{', '.join(_message(m) for m in messages)}]")
    return f"{route} " + (", ".join(said) if said else "plain request")


def _message(message: Any) -> str:
    """``role``, with its content's part types when it has parts: ``user: text, image_url``."""
    if not isinstance(message, dict):
        return "?"
    role = str(message.get("role"))
    content = message.get("content")
    if isinstance(content, list):
        return f"{role}: " + ", ".join(
            str(p.get("type")) if isinstance(p, dict) else "?" for p in content
        )
    return role


def probe_cases(
    result: ProbeResult, sent: list[tuple[str, dict[str, Any]]], policy: Policy
) -> list[Case]:
    """One case per distinct (route, body) sent on a route the policy names."""
    cases: list[Case] = []
    seen: set[str] = set()
    for route, body in sent:
        if route not in policy.routes:
            continue
        key = route + json.dumps(body, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        decision = apply_policy(policy, route, body)
        if decision.error is not None:
            expect = Expected(REFUSED, param=decision.error.param, code=decision.error.code)
        elif decision.changed:
            expect = Expected(CHANGED, body=decision.body)
        else:
            expect = Expected(UNCHANGED)
        case = Case(
            body=body, expect=expect, name=_name(route, body, result.extra, result), route=route
        )
        if decision.fanout > 1:
            case.fanout = decision.fanout
        cases.append(case)
    return cases
