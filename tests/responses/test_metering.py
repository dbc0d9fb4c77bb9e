"""The Responses route is metered like the chat routes: the engine's usage counted in
ft_gateway_tokens_total under route /v1/responses, whole answers and streams, both modes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import MODEL, completion
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.metrics import Scrape
from tests.support.responses import RESPONSES, responses_request

pytestmark = pytest.mark.anyio
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,'
    b'"total_tokens":7}}\n\n'
    b"data: [DONE]\n\n"
)
RESPONSE = {"id": "resp_e", "object": "response", "status": "completed", "output": []}
NATIVE_USAGE = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}


def translated(request: httpx.Request) -> httpx.Response:
    if b'"stream":true' in request.content:
        return httpx.Response(200, content=STREAM, headers={"content-type": "text/event-stream"})
    answer = completion("Hi")
    answer["usage"] = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    return httpx.Response(200, json=answer)


def native(request: httpx.Request) -> httpx.Response:
    done = RESPONSE | {"usage": NATIVE_USAGE}
    if b'"stream": true' in request.content or b'"stream":true' in request.content:
        text = (
            'event: response.created\ndata: {"type":"response.created","response":{}}\n\n'
            "event: response.completed\n"
            f'data: {{"type":"response.completed","response":{json.dumps(done)}}}\n\n'
        )
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=done)


@pytest.mark.parametrize(
    ("mode", "handler"),
    [("translate", translated), ("native", native)],
    ids=["translate", "native"],
)
async def test_tokens_are_counted_by_route(mode: str, handler: Any) -> None:
    # The model is a label once the config names it (observe/modelnames.py).
    named: dict[tuple[str, ...], Any] = {("model_access",): {"keys": {"metering-test": [MODEL]}}}
    settings = gateway_settings(overrides={("upstream", "responses"): mode, **named})
    app = create_app(settings, transport=MockEngine(handler).transport)
    async with asgi_client(app) as client:
        for stream in (False, True):
            answer = await client.post(RESPONSES, json=responses_request(stream=stream))
            assert answer.status_code == 200, answer.text
        scrape = Scrape((await client.get("/metrics")).text)
    count = "ft_gateway_tokens_total"
    assert scrape(count, route=RESPONSES, model=MODEL, kind="prompt") == 10
    assert scrape(count, route=RESPONSES, model=MODEL, kind="total") == 14
