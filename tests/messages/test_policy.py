"""The Messages API's route in the policy like every route's (pure): report-only, a model's
overlay and a profile's, over the shipped policy; and the gateway's Anthropic 400 names
the rule's path, the report-only one forwarding the request and reporting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.policy.engine import REPORTED, Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from tests.support.anthropic import COUNT_PATH, MESSAGES_PATH, messages_request
from tests.support.bodies import MODEL
from tests.support.paths import POLICY

TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]
OVERLAYS = f"""
models:
  {MODEL}:
    routes:
      {MESSAGES_PATH}:
        fields:
          temperature: {{maximum: 0.5}}
profiles:
  agents:
    routes:
      {MESSAGES_PATH}:
        fields:
          tools: {{action: pass}}
      {COUNT_PATH}:
        enforcement: report
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    path: Path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(POLICY.read_text() + OVERLAYS)
    return Policy(parse_policy_text(path.read_text(), file=str(path)))


@pytest.mark.parametrize(
    ("route", "body", "profile", "param"),
    [
        # The model's overlay narrows temperature on /v1/messages only.
        (MESSAGES_PATH, messages_request(temperature=0.8), None, "temperature"),
        (MESSAGES_PATH, messages_request(temperature=0.4), None, None),
        (MESSAGES_PATH, messages_request(model="other", temperature=0.8), None, None),
        # The profile passes tools to its keys; others are refused.
        (MESSAGES_PATH, messages_request(tools=TOOLS), None, "tools"),
        (MESSAGES_PATH, messages_request(tools=TOOLS), "agents", None),
        # The profile's count_tokens only reports (below); without it, refused.
        (
            COUNT_PATH,
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS},
            None,
            "tools",
        ),
    ],
)
def test_overlays_profiles_and_report_only(
    policy: Policy, route: str, body: dict[str, Any], profile: str | None, param: str | None
) -> None:
    decision = apply_policy(policy, route, body, profile=profile)
    refused = decision.error.param if decision.error is not None else None
    assert refused == param


def test_a_report_only_route_reports_what_it_would_refuse(policy: Policy) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    decision = apply_policy(policy, COUNT_PATH, body, profile="agents")
    assert decision.error is None
    assert [(o.field, o.action) for o in decision.reported] == [("tools", REPORTED)]
    assert decision.report is not None and decision.report.error.param == "tools"
