"""The translation of what ft serve's policy refuses today but an engine may honour: function
tools and calls, text.format, reasoning. Under a policy that passes every field
(tests/fixtures/policies/responses-open.yaml), against a mocked engine."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import MODEL, completion
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.paths import FIXTURES
from tests.support.responses import RESPONSES, responses_request

pytestmark = pytest.mark.anyio
OPEN = FIXTURES / "policies" / "responses-open.yaml"
WEATHER = {
    "type": "function",
    "name": "weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}


async def post(body: dict[str, Any], engine: MockEngine) -> httpx.Response:
    app = create_app(gateway_settings(policy=OPEN), transport=engine.transport)
    async with asgi_client(app) as client:
        return await client.post(RESPONSES, json=body)


def sent(engine: MockEngine) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(engine.requests[-1].content)
    return body


async def test_function_tools_and_tool_choice(engine: MockEngine) -> None:
    answer = await post(
        responses_request(
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "weather"},
            parallel_tool_calls=False,
        ),
        engine,
    )
    assert answer.status_code == 200, answer.text
    chat = sent(engine)
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": WEATHER["parameters"],
                "strict": True,
            },
        }
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert "parallel_tool_calls" not in chat  # the gateway keeps the first call (onecall.py)
    body = answer.json()
    assert body["tools"] == [WEATHER]
    assert body["parallel_tool_calls"] is False


async def test_function_call_items_become_tool_calls_and_tool_messages(
    engine: MockEngine,
) -> None:
    items = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "message", "role": "assistant", "content": "Let me look."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "weather",
            "arguments": '{"city":"Lyon"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "rain"}],
        },
    ]
    answer = await post({"model": MODEL, "input": items, "tools": [WEATHER]}, engine)
    assert answer.status_code == 200, answer.text
    assert sent(engine)["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Lyon"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
    ]


async def test_a_call_with_no_message_before_it_is_its_own_assistant_message(
    engine: MockEngine,
) -> None:
    items = [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]
    await post({"model": MODEL, "input": items}, engine)
    assert sent(engine)["messages"] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    ]


async def test_engine_tool_calls_become_function_call_items(engine: MockEngine) -> None:
    answer = completion("")
    answer["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
    }
    answer["choices"][0]["finish_reason"] = "tool_calls"
    engine.handler = lambda request: httpx.Response(200, json=answer)
    body = (await post(responses_request(tools=[WEATHER]), engine)).json()
    assert body["status"] == "completed"
    [item] = body["output"]
    assert item["type"] == "function_call" and item["id"].startswith("fc_")
    assert (item["call_id"], item["name"], item["arguments"]) == (
        "call_9",
        "weather",
        '{"city":"Oslo"}',
    )
    assert item["status"] == "completed"


@pytest.mark.parametrize(
    ("text", "response_format"),
    [
        ({"format": {"type": "json_object"}}, {"type": "json_object"}),
        (
            {
                "format": {
                    "type": "json_schema",
                    "name": "cat",
                    "schema": {"type": "object"},
                    "strict": True,
                }
            },
            {
                "type": "json_schema",
                "json_schema": {"name": "cat", "schema": {"type": "object"}, "strict": True},
            },
        ),
        ({"format": {"type": "text"}}, None),
    ],
)
async def test_text_format_becomes_response_format(
    engine: MockEngine, text: dict[str, Any], response_format: dict[str, Any] | None
) -> None:
    answer = await post(responses_request(text=text), engine)
    assert answer.status_code == 200
    assert sent(engine).get("response_format") == response_format
    assert answer.json()["text"]["format"] == text["format"]


async def test_verbosity_reasoning_effort_and_extensions(engine: MockEngine) -> None:
    await post(
        responses_request(
            text={"verbosity": "low"},
            reasoning={"effort": "high", "summary": None},
            top_k=5,
            chat_template_kwargs={"enable_thinking": False},
            metadata={"a": "b"},
            user="u",
            store=True,
            truncation="disabled",
            include=[],
            background=False,
            top_logprobs=0,
        ),
        engine,
    )
    assert sent(engine) == {
        "model": MODEL,
        "verbosity": "low",
        "reasoning_effort": "high",
        "top_k": 5,
        "chat_template_kwargs": {"enable_thinking": False},
        "messages": [{"role": "user", "content": "hi"}],
    }


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"reasoning": {"summary": "brief"}}, "reasoning.summary"),
        ({"tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools[0].type"),
        ({"tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice"),
        ({"text": {"format": {"type": "grammar"}}}, "text.format.type"),
        ({"include": ["message.output_text.logprobs"]}, "include[0]"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"truncation": "auto"}, "truncation"),
        ({"background": True}, "background"),
        ({"max_tool_calls": 2}, "max_tool_calls"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "input[0].content[0].type",
        ),
        ({"input": []}, "input"),
        ({"input": [{"content": "x"}]}, "input[0].role"),
        ({"input": ["x"]}, "input[0]"),
        ({"input": [{"role": "user", "content": ["x"]}]}, "input[0].content[0].type"),
        ({"input": [{"type": "function_call", "name": "f"}]}, "input[0].call_id"),
        ({"tools": [{"type": "function"}]}, "tools[0].name"),
    ],
)
async def test_what_chat_cannot_say_is_refused_whatever_the_policy(
    engine: MockEngine, fields: dict[str, Any], param: str
) -> None:
    answer = await post(responses_request(**fields), engine)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert engine.requests == []


async def test_image_and_file_parts_become_chat_parts(engine: MockEngine) -> None:
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"},
        {"type": "input_file", "file_id": "file_1", "filename": "a.pdf"},
    ]
    await post({"model": MODEL, "input": [{"role": "user", "content": content}]}, engine)
    assert sent(engine)["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
        {"type": "file", "file": {"file_id": "file_1", "filename": "a.pdf"}},
    ]


async def test_engine_reasoning_becomes_a_reasoning_item_and_is_not_sent_back(
    engine: MockEngine,
) -> None:
    answer = completion("Tom.")
    answer["choices"][0]["message"]["reasoning_content"] = "A cat needs a short name."
    engine.handler = lambda request: httpx.Response(200, json=answer)
    body = (await post(responses_request(), engine)).json()
    reasoning, message = body["output"]
    assert reasoning["type"] == "reasoning" and reasoning["id"].startswith("rs_")
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "A cat needs a short name."}]
    assert reasoning["summary"] == []
    assert message["content"][0]["text"] == "Tom."
    await post(
        {"model": MODEL, "input": [*body["output"], {"role": "user", "content": "Why?"}]}, engine
    )
    assert sent(engine)["messages"] == [
        {"role": "assistant", "content": "Tom."},
        {"role": "user", "content": "Why?"},
    ]
