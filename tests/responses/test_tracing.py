"""The Responses route with tracing on: a span per request, with the route and the usage."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.app.factory import create_app
from tests.support.bodies import completion
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.responses import RESPONSES, responses_request

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_request_is_traced(stream: bool) -> None:
    events = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,'
        b'"total_tokens":4}}\n\n'
        b"data: [DONE]\n\n"
    )

    def answer(request: httpx.Request) -> httpx.Response:
        if stream:
            return httpx.Response(
                200, content=events, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=completion("Hi"))

    exporter = InMemorySpanExporter()
    settings = gateway_settings(overrides={("tracing", "enabled"): True})
    app = create_app(settings, transport=MockEngine(answer).transport, span_exporter=exporter)
    async with asgi_client(app) as client:
        response = await client.post(
            RESPONSES, json=responses_request(stream=stream, max_output_tokens=9)
        )
        assert response.status_code == 200
    spans = exporter.get_finished_spans()
    server = [s for s in spans if s.attributes and s.attributes.get("http.route") == RESPONSES]
    assert len(server) == 1
    attributes = dict(server[0].attributes or {})
    assert attributes["gen_ai.usage.output_tokens"] == 1
    assert attributes["gen_ai.request.max_tokens"] == 9
    assert server[0].name == "chat Qwen3.8-Flash-Next"
