"""``instructions`` become a chat message in the role the route's policy gives a
developer message: as it is where the policy passes it, renamed where it renames it,
``system`` where it refuses it."""

from __future__ import annotations

import json
import textwrap

import pytest

from gateway.app.factory import create_app
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from gateway.responses.roles import instructions_role
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.paths import FIXTURES, POLICY
from tests.support.responses import RESPONSES, responses_request

OPEN = FIXTURES / "policies" / "responses-open.yaml"


def _input_rule(developer: str, indent: int) -> str:
    """The ``input`` field's rule: message items by role, developer's rule as given."""
    lines = f"""input:
  action: pass
  type: [string, array]
  select:
    key: type
    absent: message
    rules:
      message:
        select:
          key: role
          rules:
            user: {{}}
            system: {{}}
            developer: {developer}"""
    return textwrap.indent(lines, " " * indent).lstrip()


def _message_rules(developer: str) -> Policy:
    """A policy whose developer messages get ``developer``; its profile ``strict``
    refuses them."""
    return Policy(
        parse_policy_text(
            f"""
version: 1
routes:
  /v1/responses:
    fields:
      model: {{action: pass, type: string, required: true}}
      {_input_rule(developer, 6)}
profiles:
  strict:
    routes:
      /v1/responses:
        fields:
          {_input_rule("{action: reject}", 10)}
"""
        )
    )


@pytest.mark.parametrize(
    ("policy", "profile", "role"),
    [
        (Policy(load_policy_file(POLICY)[0]), None, "system"),  # ft serve renames developer
        (Policy(load_policy_file(OPEN)[0]), None, "developer"),  # every field passed
        (_message_rules("{}"), None, "developer"),
        (_message_rules("{action: rename, to: system}"), None, "system"),
        (_message_rules("{action: reject}"), None, "system"),
        (_message_rules("{}"), "strict", "system"),  # the key's profile refuses developer
    ],
)
def test_the_instructions_role_follows_the_policy(
    policy: Policy, profile: str | None, role: str
) -> None:
    assert instructions_role(policy, profile) == role
    assert instructions_role(policy, profile) == role  # the second answer from the cache


@pytest.mark.anyio
async def test_instructions_reach_an_engine_with_developer_messages_as_developer(
    engine: MockEngine,
) -> None:
    app = create_app(gateway_settings(policy=OPEN), transport=engine.transport)
    async with asgi_client(app) as client:
        answer = await client.post(RESPONSES, json=responses_request(instructions="Be brief."))
    assert answer.status_code == 200, answer.text
    messages = json.loads(engine.requests[-1].content)["messages"]
    assert messages[0] == {"role": "developer", "content": "Be brief."}
    assert answer.json()["instructions"] == "Be brief."
