"""upstream.responses: native: POST /v1/responses forwarded to the engine's own route under
the policy; errors normalised as for the chat routes; a Responses stream relayed event by
event, and one that breaks before its final event ended with an ``error`` event."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import sse
from tests.support.draining import cut_by_the_drain
from tests.support.engine import LAST_CHUNK, STREAM_HEAD, FakeEngine, Seen, Wire, chunk
from tests.support.faults import DEADLINE
from tests.support.gateways import MockEngine, asgi_client, gateway_settings, serve_gateway
from tests.support.responses import FAILED, RESPONSES, response_events, responses_request

pytestmark = pytest.mark.anyio
NATIVE: dict[tuple[str, ...], Any] = {("upstream", "responses"): "native"}
ANSWER = {"id": "resp_engine", "object": "response", "status": "completed", "output": []}


def native(upstream: str | None = None) -> Any:
    return gateway_settings(upstream, overrides=NATIVE)


async def test_forwarded_to_the_engine_responses_route_as_sent() -> None:
    engine = MockEngine(lambda request: httpx.Response(200, json=ANSWER))
    async with asgi_client(create_app(native(), transport=engine.transport)) as client:
        body = responses_request(max_output_tokens=5, metadata={"k": "v"})
        answer = await client.post(RESPONSES, json=body)
        refused = await client.post(
            RESPONSES, json=responses_request(tools=[{"type": "web_search"}])
        )
        missing = await client.get(f"{RESPONSES}/resp_engine")
    assert answer.status_code == 200 and answer.json() == ANSWER
    [sent] = engine.requests
    assert sent.url.path == RESPONSES
    assert json.loads(sent.content) == body
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tools[0].type"
    assert missing.status_code == 404  # the engine keeps its own responses
    assert "native mode" in missing.json()["error"]["message"]


async def test_engine_errors_are_normalised() -> None:
    vllm = {
        "error": {"message": "bad input", "type": "BadRequestError", "param": None, "code": 400}
    }
    engine = MockEngine(lambda request: httpx.Response(400, json=vllm))
    async with asgi_client(create_app(native(), transport=engine.transport)) as client:
        answer = await client.post(RESPONSES, json=responses_request())
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "message": "bad input",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def responses_event(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\n".encode() + sse({"type": kind, **data})


def streams(*events: bytes, end: bool = True) -> Any:
    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(
            STREAM_HEAD + b"".join(chunk(e) for e in events) + (LAST_CHUNK if end else b"")
        )
        if not end:
            wire.hang_up()

    return handler


async def test_a_stream_is_relayed_to_its_final_event(fake_engine: FakeEngine) -> None:
    fake_engine.handler = streams(
        responses_event("response.created", sequence_number=0, response=ANSWER),
        responses_event("response.output_text.delta", sequence_number=1, delta="hi"),
        responses_event("response.completed", sequence_number=2, response=ANSWER),
    )
    async with serve_gateway(native(fake_engine.url)) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            with anyio.fail_after(DEADLINE):
                answer = await client.post(RESPONSES, json=responses_request(stream=True))
    assert [name for name, _ in response_events(answer.content)] == [
        "response.created",
        "response.output_text.delta",
        "response.completed",
    ]
    assert fake_engine.requests[-1].target == RESPONSES


async def test_a_stream_cut_before_its_final_event_ends_with_an_error_event(
    fake_engine: FakeEngine,
) -> None:
    fake_engine.handler = streams(
        responses_event("response.created", sequence_number=0, response=ANSWER),
        responses_event("response.output_text.delta", sequence_number=1, delta="hi"),
        end=False,
    )
    async with serve_gateway(native(fake_engine.url)) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            with anyio.fail_after(DEADLINE):
                answer = await client.post(RESPONSES, json=responses_request(stream=True))
    events = response_events(answer.content)
    assert [name for name, _ in events] == [
        "response.created",
        "response.output_text.delta",
        *FAILED,
    ]
    assert events[-2][1]["sequence_number"] == 2
    assert events[-2][1]["code"] in ("upstream_protocol_error", "upstream_error")
    failed = events[-1][1]
    assert failed["sequence_number"] == 3
    assert failed["response"]["id"] == ANSWER["id"] and failed["response"]["status"] == "failed"


async def test_drain_expiry_ends_a_native_stream_with_responses_events(
    fake_engine: FakeEngine,
) -> None:
    async def one_event_then_silence(request: Seen, wire: Wire) -> None:
        created = responses_event("response.created", sequence_number=0, response=ANSWER)
        await wire.send(STREAM_HEAD + chunk(created))
        await wire.until_client_leaves()

    fake_engine.handler = one_event_then_silence
    async with serve_gateway(native(fake_engine.url)) as gateway:
        with anyio.fail_after(DEADLINE):
            body = responses_request(stream=True)
            rest = await cut_by_the_drain(gateway, RESPONSES, body, after="event: response.created")
            await fake_engine.requests[-1].connection.closed.wait()
        record = gateway.recorder.finished_exchanges[-1]
    names = [line[7:] for line in rest if line.startswith("event: ")]
    # Responses framing, as translate mode ends it: not the chat routes' [DONE].
    assert names == FAILED
    assert "[DONE]" not in "".join(rest)
    assert any('"code":"shutting_down"' in line for line in rest)
    assert record.status == 200 and record.error_code == "shutting_down"
