"""Today's Responses clients' default requests against a policy: which would be refused,
and why. The bodies are recorded from the clients (Codex CLI, the OpenAI Agents SDK, the
Vercel AI SDK, GitHub Copilot Chat), each file naming its version and sources; the tests
keep the same files as fixtures (tests/fixtures/clients)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import GatewayError
from gateway.policy.engine import Policy, apply_policy
from gateway.responses.translate import input_items, to_chat

BODIES = Path(__file__).resolve().parent / "clients"
RESPONSES = "/v1/responses"


@dataclass(frozen=True)
class ClientVerdict:
    """One client's default body against the route: None when it passes."""

    client: str
    version: str
    refused: GatewayError | None

    def line(self) -> str:
        head = f"{self.client} ({re.split(r'[,(]', self.version)[0].strip()})"
        if self.refused is None:
            return f"  {head}: passes"
        return f"  {head}: refused at {self.refused.param}: {self.refused.message}"


def client_bodies() -> list[dict[str, Any]]:
    """The recorded bodies, each with ``client``, ``version``, ``sources``, ``body``."""
    return [json.loads(path.read_text()) for path in sorted(BODIES.glob("*.json"))]


def judge(policy: Policy, body: dict[str, Any]) -> GatewayError | None:
    """Why ``body`` would be refused on /v1/responses under ``policy`` (policy, then the
    translation onto chat completions; item_reference items are the store's to resolve)."""
    decision = apply_policy(policy, RESPONSES, body, profile=None)
    if decision.error is not None:
        return decision.error
    approved = dict(decision.body)
    try:
        items = input_items(approved.get("input"), ids=False)
        kept = [item for item in items if item.get("type") != "item_reference"]
        to_chat(approved, kept, first=0)
    except GatewayError as exc:
        return exc
    return None


def judge_clients(policy: Policy) -> list[ClientVerdict]:
    """Each recorded client body against ``policy``'s /v1/responses route."""
    if RESPONSES not in policy.routes:
        return []
    return [
        ClientVerdict(recorded["client"], recorded["version"], judge(policy, recorded["body"]))
        for recorded in client_bodies()
    ]


def report_lines(verdicts: list[ClientVerdict]) -> list[str]:
    """The probe's printed lines for ``verdicts``."""
    if not verdicts:
        return []
    return [
        "/v1/responses: today's clients' default requests under this policy",
        *[verdict.line() for verdict in verdicts],
    ]
