"""The Messages API (Anthropic's) as the tests send it and read it back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.app.factory import create_app
from gateway.observe.exchange import Observers
from tests.support.bodies import MODEL, sse_events
from tests.support.gateways import MockEngine, Recorder, asgi_client, gateway_settings
from tests.support.paths import POLICY

MESSAGES_PATH = "/v1/messages"
COUNT_PATH = "/v1/messages/count_tokens"
ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}
# The event sequence of an answer with one text block, as Anthropic sends it
# (platform.claude.com/docs/en/build-with-claude/streaming), the deltas squeezed to one.
ONE_TEXT_BLOCK = [
    "message_start",
    "ping",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
]


def messages_request(**fields: Any) -> dict[str, Any]:
    """A Messages request: the model, max_tokens, one user message, and ``fields``."""
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    } | fields


def anthropic_events(body: str | bytes) -> list[tuple[str, dict[str, Any]]]:
    """A Messages event stream as (event name, data) pairs; checks Anthropic's framing of
    each (an ``event:`` line, then a ``data:`` line whose ``type`` is the event's name),
    and that no ``[DONE]`` line comes."""
    events = []
    for event in sse_events(body):
        lines = event.split("\n")
        assert len(lines) == 2, event
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), event
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:], event
        events.append((lines[0][7:], data))
    return events


def anthropic_event(kind: str, **data: Any) -> str:
    """One Messages API event as an engine that serves it natively sends it."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def squeezed(names: Sequence[str]) -> list[str]:
    """``names`` with runs of one name as one (a block's many deltas as one)."""
    return [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]


def anthropic_error(response: httpx.Response, status: int, kind: str) -> str:
    """The Anthropic-shaped error of ``response``, checked to have ``status``, ``type``
    ``kind`` and the request's id (body and ``request-id`` header); its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"type", "error", "request_id"}, body
    assert body["type"] == "error"
    assert body["error"]["type"] == kind, body
    assert response.headers["request-id"] == body["request_id"]
    assert response.headers["x-request-id"] == body["request_id"]
    message: str = body["error"]["message"]
    assert message
    return message


def tools_policy(directory: Path) -> Path:
    """The shipped policy with the Messages API's tool calling passed (tools, forced
    choices, tool_use and tool_result blocks; a result's is_error stripped, its content
    saying what failed): the policy of an engine whose tool calls the gateway may trust,
    such as the reference engine with ``--tools``. Written in ``directory``."""
    policy = yaml.safe_load(POLICY.read_text())
    for route in (MESSAGES_PATH, COUNT_PATH):
        fields = policy["routes"][route]["fields"]
        tools = fields["tools"] = dict(fields["tools"], action="pass")
        tools.pop("reason", None)
        tools.pop("neutral", None)
    # The rules below are one object in both routes (YAML anchors): set once.
    fields = policy["routes"][MESSAGES_PATH]["fields"]
    for choice in ("any", "tool"):
        fields["tool_choice"]["select"]["rules"][choice]["action"] = "pass"
    roles = fields["messages"]["select"]["rules"]
    result = roles["user"]["fields"]["content"]["select"]["rules"]["tool_result"]
    result["action"] = "pass"
    result["fields"]["is_error"] = {"action": "strip", "type": "boolean"}
    roles["assistant"]["fields"]["content"]["select"]["rules"]["tool_use"]["action"] = "pass"
    path = directory / "messages-tools.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


async def post_through(
    path: str,
    body: Any,
    engine: MockEngine,
    *,
    headers: dict[str, str],
    overrides: dict[tuple[str, ...], Any] | None = None,
) -> tuple[httpx.Response, Recorder]:
    """``body`` posted with ``headers`` to a gateway (default settings and ``overrides``)
    in front of ``engine``, in process; the answer and what the gateway recorded."""
    app = create_app(gateway_settings(overrides=overrides), transport=engine.transport)
    recorder = Recorder()
    app.state.gateway.observer = Observers(app.state.gateway.observer, recorder)
    async with asgi_client(app) as client:
        response = await client.post(path, json=body, headers=headers)
    return response, recorder


# A JSON-Schema keyword table as an engine with a grammar backend that drops maxLength
# needs (tests/fixtures/policies/structured.yaml's, shortened).
DROPS_MAX_LENGTH: dict[str, Any] = {
    "unknown_keywords": "reject",
    "keywords": {
        "type": {},
        "properties": {},
        "required": {},
        "additionalProperties": {},
        "items": {},
        "enum": {},
        "maxLength": {"action": "reject", "reason": "The engine ignores maxLength."},
    },
}


def structured_policy(directory: Path, *, answers: str = "enforce") -> Path:
    """tools_policy's, with structured outputs passed (``output_config.format``), a
    ``json_schema`` keyword table on each tool's ``input_schema`` and on the format's
    schema (DROPS_MAX_LENGTH), and every answer check at ``answers`` on /v1/messages.
    Written in ``directory``."""
    policy = yaml.safe_load(tools_policy(directory).read_text())
    route = policy["routes"][MESSAGES_PATH]
    route["answers"] = dict.fromkeys(
        ("schema", "tool_arguments", "tool_choice", "parallel_tool_calls"), answers
    )
    fields = route["fields"]
    custom = fields["tools"]["select"]["rules"]["custom"]["fields"]
    custom["input_schema"] = dict(custom["input_schema"], json_schema=DROPS_MAX_LENGTH)
    schema = {"action": "pass", "type": "object", "required": True}
    fields["output_config"]["fields"]["format"] = {
        "action": "pass",
        "type": "object",
        "fields": {
            "type": {"action": "pass", "type": "string", "enum": ["json_schema"]},
            "schema": dict(schema, json_schema=DROPS_MAX_LENGTH),
        },
    }
    path = directory / "messages-structured.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path
