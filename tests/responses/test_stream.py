"""Streaming POST /v1/responses over real sockets: the gateway under uvicorn in front of the
raw-socket fake engine. The event sequence, each engine chunk's events sent before the
next chunk exists, engine failures as events, and the client leaving closing the engine
request. Runs over each upstream client where connections are what is checked."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from gateway.settings import Settings
from tests.support.bodies import DONE, sse
from tests.support.draining import cut_by_the_drain
from tests.support.engine import LAST_CHUNK, STREAM_HEAD, FakeEngine, Seen, Wire, chunk
from tests.support.faults import DEADLINE, HELD, fault_settings
from tests.support.gateways import Gateway, gateway_settings, serve_gateway
from tests.support.paths import FIXTURES
from tests.support.responses import (
    FAILED,
    RESPONSES,
    STARTED,
    TEXT_MESSAGE,
    response_events,
    responses_request,
)
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio
TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    return fault_settings(fake_engine.url, client=upstream_client, **HELD)


async def stream(gateway: Gateway, body: dict[str, Any], **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
        return await client.post(RESPONSES, json=body | {"stream": True}, headers=headers)


async def test_the_event_sequence(fake_engine: FakeEngine, gateway: Gateway) -> None:
    with anyio.fail_after(DEADLINE):
        answer = await stream(gateway, responses_request())
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert b"[DONE]" not in answer.content
    events = response_events(answer.content)
    assert [name for name, _ in events] == TEXT_EVENTS
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    sent = fake_engine.requests[-1]
    assert sent.target == "/v1/chat/completions"
    assert sent.json()["stream_options"] == {"include_usage": True}
    created = events[0][1]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    deltas = [data["delta"] for name, data in events if name == "response.output_text.delta"]
    assert deltas == ["t0", "t1", "t2"]
    item_ids = {data["item_id"] for _, data in events[3:9]}
    assert item_ids == {events[2][1]["item"]["id"]}
    assert events[7][1]["text"] == "t0t1t2"
    final = events[-1][1]["response"]
    assert final["id"] == created["id"] and final["status"] == "completed"
    assert final["output"] == [events[9][1]["item"]]
    assert final["output"][0]["content"][0]["text"] == "t0t1t2"


async def test_each_chunk_is_sent_as_it_arrives(fake_engine: FakeEngine, gateway: Gateway) -> None:
    gate = fake_engine.gate("first")
    seen: list[str] = []
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            body = responses_request(stream=True)
            headers = {"x-bad-gate": "first"}
            async with client.stream("POST", RESPONSES, json=body, headers=headers) as response:
                lines = response.aiter_lines()
                async for line in lines:
                    if line.startswith("event: "):
                        seen.append(line[7:])
                    if seen[-1:] == ["response.output_text.delta"]:
                        break
                # The engine holds its second chunk until the gate opens: the first
                # delta came through on its own.
                assert not gate.is_set()
                gate.set()
                seen += [line[7:] async for line in lines if line.startswith("event: ")]
    assert seen == TEXT_EVENTS


async def test_a_client_that_leaves_closes_the_engine_request(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async def one_chunk_then_silence(request: Seen, wire: Wire) -> None:
        await wire.send(
            STREAM_HEAD + chunk(sse({"choices": [{"index": 0, "delta": {"content": "a"}}]}))
        )
        await wire.until_client_leaves()

    fake_engine.handler = one_chunk_then_silence
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            body = responses_request(stream=True)
            async with client.stream("POST", RESPONSES, json=body) as response:
                async for line in response.aiter_lines():
                    if line == "event: response.output_text.delta":
                        break
        # Leaving the block closed the client's connection.
        await fake_engine.requests[-1].connection.closed.wait()
        exchange = await gateway.recorder.wait_for_request(response.headers["x-request-id"])
    assert exchange.client_disconnected


@pytest.mark.parametrize("mode", ["cut", "reset", "badsse"])
async def test_an_engine_failure_mid_stream_is_an_error_event_and_response_failed(
    fake_engine: FakeEngine, gateway: Gateway, mode: str
) -> None:
    with anyio.fail_after(DEADLINE):
        answer = await stream(gateway, responses_request(), **{"x-bad-mode": mode})
    events = response_events(answer.content)
    names = [name for name, _ in events]
    assert names[:5] == TEXT_EVENTS[:5]
    assert names[-2:] == ["error", "response.failed"]
    error = events[-2][1]
    assert error["code"] in ("upstream_protocol_error", "upstream_error") and error["message"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "server_error"
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))


async def test_the_engine_own_error_event_ends_the_stream(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    error = {"error": {"message": "KV cache full", "type": "BadRequestError", "code": 400}}
    fake_engine.handler = sends_stream(sse(error))
    with anyio.fail_after(DEADLINE):
        answer = await stream(gateway, responses_request())
    events = response_events(answer.content)
    assert [name for name, _ in events] == [*STARTED, *FAILED]
    assert events[2][1]["message"] == "KV cache full"


def sends_stream(*events: bytes) -> Any:
    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(STREAM_HEAD + b"".join(chunk(e) for e in events) + chunk(DONE) + LAST_CHUNK)

    return handler


def tool_delta(index: int, **function: str) -> bytes:
    call: dict[str, Any] = {"index": index, "function": function}
    if "name" in function:
        call |= {"id": f"call_{index}", "type": "function"}
    return sse({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]})


async def test_tool_calls_stream_as_function_call_items(fake_engine: FakeEngine) -> None:
    fake_engine.handler = sends_stream(
        sse({"choices": [{"index": 0, "delta": {"content": "Checking."}}]}),
        tool_delta(0, name="weather", arguments='{"ci'),
        tool_delta(0, arguments='ty":"Oslo"}'),
        tool_delta(1, name="time", arguments="{}"),
        sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        sse(
            {
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
            }
        ),
    )
    settings = gateway_settings(
        fake_engine.url, policy=FIXTURES / "policies" / "responses-open.yaml"
    )
    async with serve_gateway(settings) as gateway:
        with anyio.fail_after(DEADLINE):
            answer = await stream(gateway, responses_request())
    events = response_events(answer.content)
    assert [name for name, _ in events] == [
        *STARTED,
        *TEXT_MESSAGE,
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[11][1]["arguments"] == '{"city":"Oslo"}'
    final = events[-1][1]["response"]
    assert [item["type"] for item in final["output"]] == [
        "message",
        "function_call",
        "function_call",
    ]
    assert final["output"][1] | {"id": ""} == {
        "id": "",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_0",
        "name": "weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert [item["output_index"] for _, item in events if "output_index" in item][-1] == 2
    assert final["usage"]["input_tokens"] == 5 and final["usage"]["total_tokens"] == 12


async def test_a_length_cut_stream_ends_with_response_incomplete(fake_engine: FakeEngine) -> None:
    fake_engine.handler = sends_stream(
        sse({"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": "length"}]})
    )
    async with serve_gateway(gateway_settings(fake_engine.url)) as gateway:
        with anyio.fail_after(DEADLINE):
            answer = await stream(gateway, responses_request(max_output_tokens=1))
    events = response_events(answer.content)
    assert events[-1][0] == "response.incomplete"
    final = events[-1][1]["response"]
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert events[-2][1]["item"]["status"] == "incomplete"


async def test_an_empty_answer_is_one_empty_message(fake_engine: FakeEngine) -> None:
    fake_engine.handler = sends_stream(
        sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )
    async with serve_gateway(gateway_settings(fake_engine.url)) as gateway:
        with anyio.fail_after(DEADLINE):
            answer = await stream(gateway, responses_request())
    events = response_events(answer.content)
    final = events[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == ""
    assert json.loads(json.dumps(final))["status"] == "completed"


async def test_drain_expiry_ends_the_stream_with_response_failed(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async def one_chunk_then_silence(request: Seen, wire: Wire) -> None:
        first = sse({"choices": [{"index": 0, "delta": {"content": "a"}}]})
        await wire.send(STREAM_HEAD + chunk(first))
        await wire.until_client_leaves()

    fake_engine.handler = one_chunk_then_silence
    with anyio.fail_after(DEADLINE):
        body = responses_request(stream=True)
        delta = "event: response.output_text.delta"
        rest = await cut_by_the_drain(gateway, RESPONSES, body, after=delta)
        await fake_engine.requests[-1].connection.closed.wait()
    names = [line[7:] for line in rest if line.startswith("event: ")]
    assert names[-2:] == ["error", "response.failed"]
    assert "[DONE]" not in "".join(rest)
    assert any('"code":"shutting_down"' in line for line in rest)


async def test_a_llama_cpp_error_line_ends_the_stream_as_the_engines_error(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    # llama.cpp's server writes a mid-stream failure as an ``error:`` line: the chat
    # routes relayed it as the engine's error, /v1/responses as "not an SSE field".
    first = sse({"choices": [{"index": 0, "delta": {"content": "a"}}]})
    line = b'error: {"code": 400, "message": "context full", "type": "invalid_request"}\n\n'
    fake_engine.handler = sends_stream(first, line)
    with anyio.fail_after(DEADLINE):
        answer = await stream(gateway, responses_request())
    events = response_events(answer.content)
    names = [name for name, _ in events]
    assert names[-2:] == ["error", "response.failed"]
    assert events[-2][1]["message"] == "context full"
    assert "server-sent event" not in answer.text


async def test_reasoning_deltas_stream_as_a_reasoning_item(fake_engine: FakeEngine) -> None:
    def delta(**fields: str) -> bytes:
        return sse({"choices": [{"index": 0, "delta": fields, "finish_reason": None}]})

    fake_engine.handler = sends_stream(
        delta(reasoning_content="Short"),
        delta(reasoning_content=" names."),
        delta(content="Tom."),
    )
    async with serve_gateway(gateway_settings(fake_engine.url)) as gateway:
        with anyio.fail_after(DEADLINE):
            answer = await stream(gateway, responses_request())
    events = response_events(answer.content)
    assert [name for name, _ in events][:6] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    ]
    assert events[5][1]["text"] == "Short names."
    final = events[-1][1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["output"][1]["content"][0]["text"] == "Tom."


async def test_the_sdk_parser_takes_reasoning_and_tool_call_streams(
    fake_engine: FakeEngine,
) -> None:
    fake_engine.handler = sends_stream(
        sse({"choices": [{"index": 0, "delta": {"reasoning_content": "Hm."}}]}),
        sse({"choices": [{"index": 0, "delta": {"content": "Checking."}}]}),
        tool_delta(0, name="weather", arguments='{"city":"Oslo"}'),
        sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    )
    settings = gateway_settings(
        fake_engine.url, policy=FIXTURES / "policies" / "responses-open.yaml"
    )
    async with serve_gateway(settings) as gateway, sdk(gateway.url) as client:
        with anyio.fail_after(DEADLINE):
            async with client.responses.stream(model="m", input="hi") as events:
                names = [event.type async for event in events]
                final = await events.get_final_response()
    assert names[-1] == "response.completed"
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output_text == "Checking."
