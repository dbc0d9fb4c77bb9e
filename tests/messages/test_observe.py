"""The Messages API's routes get what every route gets: tokens metered from the engine's
usage (translate and native, whole and streamed), a span in the GenAI conventions, the
access log's line, and the request counted by route."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.app.factory import create_app
from gateway.observe.exchange import Observers
from gateway.observe.logs import AccessLog
from tests.support.anthropic import MESSAGES_PATH, anthropic_event, messages_request
from tests.support.bodies import MODEL, completion
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.metrics import Scrape

pytestmark = pytest.mark.anyio
CHAT_STREAM = (
    b'data: {"id":"chatcmpl-9","model":"served",'
    b'"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n'
    b"data: [DONE]\n\n"
)
MESSAGE = {
    "id": "msg_01x",
    "type": "message",
    "role": "assistant",
    "model": "served",
    "content": [{"type": "text", "text": "Hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2, "cache_read_input_tokens": 2},
}


NATIVE_STREAM = (
    anthropic_event(
        "message_start",
        message={
            **MESSAGE,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 2, "output_tokens": 0},
        },
    )
    + anthropic_event("content_block_start", index=0, content_block={"type": "text", "text": ""})
    + anthropic_event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi"})
    + anthropic_event("content_block_stop", index=0)
    + anthropic_event(
        "message_delta",
        delta={"stop_reason": "end_turn", "stop_sequence": None},
        usage={"output_tokens": 2},
    )
    + anthropic_event("message_stop")
)


def translated(request: httpx.Request) -> httpx.Response:
    if b'"stream":true' in request.content:
        return httpx.Response(
            200, content=CHAT_STREAM, headers={"content-type": "text/event-stream"}
        )
    answer = completion("Hi", model="served")
    answer["usage"] = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    return httpx.Response(200, json=answer)


def native(request: httpx.Request) -> httpx.Response:
    if b'"stream":true' in request.content or b'"stream": true' in request.content:
        return httpx.Response(
            200, text=NATIVE_STREAM, headers={"content-type": "text/event-stream"}
        )
    return httpx.Response(200, json=MESSAGE)


@pytest.mark.parametrize(
    ("mode", "handler"),
    [("translate", translated), ("native", native)],
    ids=["translate", "native"],
)
async def test_tokens_requests_spans_and_log_lines(mode: str, handler: Any) -> None:
    exporter = InMemorySpanExporter()
    settings = gateway_settings(
        overrides={("upstream", "messages"): mode, ("tracing", "enabled"): True}
    )
    app = create_app(settings, transport=MockEngine(handler).transport, span_exporter=exporter)
    lines = io.BytesIO()
    state = app.state.gateway
    state.observer = Observers(state.observer, AccessLog(lines, format="json"))
    async with asgi_client(app) as client:
        for stream in (False, True):
            body = messages_request(stream=stream, max_tokens=9, stop_sequences=["END"])
            answer = await client.post(MESSAGES_PATH, json=body)
            assert answer.status_code == 200, answer.text
        scrape = Scrape((await client.get("/metrics")).text)
    count = "ft_gateway_tokens_total"
    # The model's label: a name the config gives, and no config names this one
    # (observe/modelnames.py), so "(other)", as on the OpenAI routes.
    other = "(other)"
    # Anthropic counts the cached prompt apart: the meter counts the whole prompt.
    assert scrape(count, route=MESSAGES_PATH, model=other, kind="prompt") == 10
    assert scrape(count, route=MESSAGES_PATH, model=other, kind="total") == 14
    assert scrape("ft_gateway_requests_total", route=MESSAGES_PATH, model=other, status="200") == 2
    assert scrape(count, route=MESSAGES_PATH, model=MODEL, kind="prompt") is None
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [(r["path"], r["status"], r["total_tokens"]) for r in logged] == [
        (MESSAGES_PATH, 200, 7)
    ] * 2
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("http.route") == MESSAGES_PATH
    ]
    assert len(spans) == 2
    for span in spans:
        attributes = dict(span.attributes or {})
        assert span.name == f"chat {MODEL}"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.max_tokens"] == 9
        assert attributes["gen_ai.request.stop_sequences"] == ("END",)
        assert attributes["gen_ai.usage.input_tokens"] == 5
        assert attributes["gen_ai.usage.output_tokens"] == 2
        assert attributes["gen_ai.response.model"] == "served"
        expected = ("stop",) if mode == "translate" else ("end_turn",)
        assert attributes["gen_ai.response.finish_reasons"] == expected
