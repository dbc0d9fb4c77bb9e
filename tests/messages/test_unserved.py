"""What the Messages API's clients get for what the gateway does not serve: a model
the single deployment does not list (fleet/served.py) and Anthropic's Message
Batches API, each Anthropic's 404 ``not_found_error`` naming it, with a request-id,
the engine never asked."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.app.factory import create_app
from tests.support.anthropic import (
    ANTHROPIC_VERSION,
    COUNT_PATH,
    MESSAGES_PATH,
    messages_request,
    post_through,
)
from tests.support.gateways import MockEngine, asgi_client, gateway_settings

pytestmark = pytest.mark.anyio
HEADERS = {**ANTHROPIC_VERSION, "x-api-key": "sk-ant-test"}


def _anthropic_404(response: Any) -> str:
    assert response.status_code == 404, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert body["request_id"] == response.headers["request-id"]
    message: str = body["error"]["message"]
    return message


@pytest.mark.parametrize("path", [MESSAGES_PATH, MESSAGES_PATH + "?beta=true", COUNT_PATH])
async def test_a_model_the_engine_does_not_list_is_anthropics_404(path: str) -> None:
    engine = MockEngine()  # it lists the tests' own names (tests/support/gateways.py)
    body = messages_request(model="claude-sonnet-4-6")
    response, recorder = await post_through(path, body, engine, headers=HEADERS)
    assert "claude-sonnet-4-6" in _anthropic_404(response)
    assert engine.requests == []  # asked for its model list only
    (record,) = recorder.finished_exchanges
    assert (record.status, record.error_code) == (404, "model_not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/messages/batches"),
        ("GET", "/v1/messages/batches"),
        ("GET", "/v1/messages/batches/msgbatch_01/results"),
        ("POST", "/v1/messages/batches/msgbatch_01/cancel"),
    ],
)
async def test_the_message_batches_api_is_anthropics_404_naming_it(method: str, path: str) -> None:
    engine = MockEngine()
    app = create_app(gateway_settings(), transport=engine.transport)
    async with asgi_client(app) as client:
        response = await client.request(method, path, headers=HEADERS, json={"requests": []})
    message = _anthropic_404(response)
    assert "Message Batches API" in message and "/v1/batches" in message
    assert engine.requests == []


async def test_a_method_the_messages_route_lacks_is_anthropics_error() -> None:
    app = create_app(gateway_settings(), transport=MockEngine().transport)
    async with asgi_client(app) as client:
        response = await client.get(MESSAGES_PATH, headers=HEADERS)
    assert response.status_code == 405
    body = response.json()
    assert (body["type"], body["error"]["type"]) == ("error", "invalid_request_error")
    assert response.headers["request-id"]
