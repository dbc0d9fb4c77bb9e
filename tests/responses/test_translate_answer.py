"""POST /v1/responses in translate mode against a mocked engine: what the engine is sent,
and the answer in OpenAI's response shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import ERROR_KEYS, MODEL, completion
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.responses import RESPONSES, responses_request

pytestmark = pytest.mark.anyio


async def post(body: dict[str, Any], engine: MockEngine) -> httpx.Response:
    app = create_app(gateway_settings(), transport=engine.transport)
    async with asgi_client(app) as client:
        return await client.post(RESPONSES, json=body)


def sent(engine: MockEngine) -> dict[str, Any]:
    assert len(engine.requests) == 1
    request = engine.requests[0]
    assert request.url.path == "/v1/chat/completions"
    body: dict[str, Any] = json.loads(request.content)
    return body


async def test_string_input_becomes_one_user_message(engine: MockEngine) -> None:
    answer = await post(
        responses_request(instructions="Be brief.", max_output_tokens=7, temperature=0.5, seed=3),
        engine,
    )
    assert answer.status_code == 200, answer.text
    assert sent(engine) == {
        "model": MODEL,
        "max_tokens": 7,
        "temperature": 0.5,
        "seed": 3,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
    }
    body = answer.json()
    assert body["object"] == "response"
    assert body["id"].startswith("resp_")
    assert body["status"] == "completed"
    assert body["incomplete_details"] is None
    assert body["instructions"] == "Be brief."
    assert body["max_output_tokens"] == 7
    assert body["temperature"] == 0.5
    assert body["top_p"] is None
    [item] = body["output"]
    assert item["type"] == "message" and item["role"] == "assistant"
    assert item["id"].startswith("msg_") and item["status"] == "completed"
    assert item["content"] == [
        {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
    ]
    assert body["usage"] == {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2,
    }
    assert body["store"] is True  # kept by the default store (SQLite in the state directory)
    assert body["tools"] == [] and body["tool_choice"] == "auto"
    assert body["text"] == {"format": {"type": "text"}, "verbosity": "medium"}


async def test_items_with_input_text_parts_and_assistant_output_text(engine: MockEngine) -> None:
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "one"}]},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "two", "annotations": []}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "three"},
                {"type": "input_text", "text": "four"},
            ],
        },
    ]
    answer = await post({"model": MODEL, "input": items}, engine)
    assert answer.status_code == 200, answer.text
    assert sent(engine)["messages"] == [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "three"}, {"type": "text", "text": "four"}],
        },
    ]


async def test_length_cut_is_incomplete(engine: MockEngine) -> None:
    cut = completion("Hel")
    cut["choices"][0]["finish_reason"] = "length"
    engine.handler = lambda request: httpx.Response(200, json=cut)
    body = (await post(responses_request(max_output_tokens=1), engine)).json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["output"][0]["status"] == "incomplete"


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
            "text.format.type",
            "unsupported_value",
        ),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "unsupported_value"),
        ({"tools": [{"type": "function", "name": "f"}]}, "tools[0].type", "unsupported_value"),
        ({"background": True}, "background", "unsupported_parameter"),
        ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_parameter"),
        ({"include": ["message.output_text.logprobs"]}, "include[0]", "invalid_value"),
        ({"tools": [], "tool_choice": "required"}, "tool_choice", "unsupported_value"),
        ({"reasoning": {"effort": "low"}}, "reasoning.effort", "unsupported_parameter"),
        ({"truncation": "auto"}, "truncation", "unsupported_value"),
        ({"wizard": 1}, "wizard", "unknown_parameter"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0].type",
            "unsupported_value",
        ),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role", "invalid_value"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]},
            "input[0].type",
            "unsupported_value",
        ),
        ({"previous_response_id": "resp_1"}, "previous_response_id", "previous_response_not_found"),
    ],
)
async def test_refused_fields_name_the_path_and_never_reach_the_engine(
    engine: MockEngine, fields: dict[str, Any], param: str, code: str
) -> None:
    answer = await post(responses_request(**fields), engine)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert set(error) == ERROR_KEYS
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code), error
    assert engine.requests == []


@pytest.mark.parametrize(
    ("status", "content", "expected_status", "code"),
    [
        (400, b'{"object": "error", "message": "prompt too long", "code": 400}', 400, None),
        (500, b"Traceback (most recent call last): ...", 500, "upstream_error"),
        (200, b"[1, 2]", 502, "upstream_protocol_error"),
        (200, b"{not json", 502, "upstream_protocol_error"),
    ],
)
async def test_engine_errors_and_bad_answers_are_normalised(
    engine: MockEngine, status: int, content: bytes, expected_status: int, code: str | None
) -> None:
    engine.handler = lambda request: httpx.Response(
        status, content=content, headers={"content-type": "application/json"}
    )
    answer = await post(responses_request(), engine)
    error = answer.json()["error"]
    assert set(error) == ERROR_KEYS
    assert error["code"] == code
    if status == 500:
        assert "Traceback" not in answer.text
    assert answer.status_code == expected_status
