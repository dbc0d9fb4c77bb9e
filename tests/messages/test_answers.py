"""The policy's JSON-Schema rules and answer checks on the Messages API: a tool's
``input_schema`` and ``output_config.format.schema`` are checked where they stand (a
keyword the engine drops is Anthropic's 400 naming its path), and the engine's answer
against them (``answers:``), whole and streamed, translated and native."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.errors import AnswerViolation
from gateway.messages.errors import anthropic_path
from gateway.schemas.answers import check_message
from gateway.schemas.expect import ENFORCE, OFF, Answers, expectation
from tests.support.anthropic import (
    MESSAGES_PATH,
    anthropic_error,
    anthropic_event,
    anthropic_events,
    messages_request,
    post_through,
    structured_policy,
)
from tests.support.bodies import MODEL, completion, sse
from tests.support.gateways import MockEngine

pytestmark = pytest.mark.anyio
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test"}
CITY: Any = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER: Any = {"name": "get_weather", "input_schema": CITY}
ALL = Answers(ENFORCE, ENFORCE, ENFORCE, ENFORCE)
CAT: Any = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _called(arguments: str, *, content: str | None = None) -> dict[str, Any]:
    """A chat completion that calls get_weather with ``arguments``."""
    answer = completion(content or "")
    message = answer["choices"][0]["message"]
    message["content"] = content
    message["tool_calls"] = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
    ]
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


def _engine(answer: dict[str, Any]) -> MockEngine:
    return MockEngine(lambda request: httpx.Response(200, json=answer))


async def _post(
    tmp_path: Path,
    body: dict[str, Any],
    engine: MockEngine,
    *,
    answers: str = "enforce",
    more: dict[tuple[str, ...], Any] | None = None,
) -> tuple[httpx.Response, Any]:
    overrides = {("policy",): str(structured_policy(tmp_path, answers=answers)), **(more or {})}
    return await post_through(MESSAGES_PATH, body, engine, headers=HEADERS, overrides=overrides)


# What a Messages body asks of its answer (pure).
@pytest.mark.parametrize(
    ("fields", "schema", "where", "tools", "choice", "single"),
    [
        (
            {"tools": [WEATHER]},
            None,
            "",
            {"get_weather": (CITY, "tools[0].input_schema")},
            None,
            False,
        ),
        ({"tools": [WEATHER], "tool_choice": {"type": "any"}}, None, "", ..., "required", False),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "get_weather"}},
            None,
            "",
            ...,
            "get_weather",
            False,
        ),
        (
            {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
            None,
            "",
            {},
            None,
            True,
        ),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": CAT}}},
            CAT,
            "output_config.format.schema",
            {},
            None,
            False,
        ),
        (
            {"output_format": {"type": "json_schema", "schema": CAT}},
            CAT,
            "output_format.schema",
            {},
            None,
            False,
        ),
        (
            {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            None,
            "",
            None,
            None,
            False,
        ),
    ],
)
def test_a_messages_body_says_what_its_answer_must_be(
    fields: dict[str, Any], schema: Any, where: str, tools: Any, choice: Any, single: bool
) -> None:
    expect = expectation(ALL, MESSAGES_PATH, messages_request(**fields))
    if tools is None:  # a server tool: nothing the gateway checks
        assert expect is None
        return
    assert expect is not None
    assert (expect.schema, expect.schema_param, expect.choice, expect.single) == (
        schema,
        where,
        choice,
        single,
    )
    if tools is not ...:
        assert expect.tools == tools


def test_checks_off_ask_nothing() -> None:
    body = messages_request(tools=[WEATHER], tool_choice={"type": "any"})
    assert expectation(Answers(OFF, OFF, OFF, OFF), MESSAGES_PATH, body) is None


def test_a_message_is_checked_at_its_own_paths() -> None:
    expect = expectation(
        ALL, MESSAGES_PATH, messages_request(tools=[WEATHER], tool_choice={"type": "any"})
    )
    assert expect is not None
    bad = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": 7}}
    message = {
        "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "Let me look."}, bad],
    }
    (found,) = check_message(expect, message)
    assert (found.param, found.code) == ("content[1].input.city", "answer_violates_schema")
    prose = {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Sunny."}]}
    (found,) = check_message(expect, prose)
    assert (found.param, found.code) == ("content", "answer_violates_tool_choice")
    # Cut at max_tokens: its JSON may be partial, so nothing is checked.
    assert check_message(expect, {**message, "stop_reason": "max_tokens"}) == []


# The request's schemas, where they stand.
@pytest.mark.parametrize(
    ("fields", "path"),
    [
        (
            {
                "tools": [
                    {
                        "name": "get_weather",
                        "input_schema": {
                            **CITY,
                            "properties": {"city": {"type": "string", "maxLength": 9}},
                        },
                    }
                ]
            },
            "tools.0.input_schema.properties.city.maxLength",
        ),
        (
            {
                "output_config": {
                    "format": {
                        "type": "json_schema",
                        "schema": {
                            **CAT,
                            "properties": {"name": {"type": "string", "maxLength": 5}},
                        },
                    }
                }
            },
            "output_config.format.schema.properties.name.maxLength",
        ),
    ],
)
async def test_a_keyword_the_engine_drops_is_anthropics_400_at_its_path(
    tmp_path: Path, fields: dict[str, Any], path: str
) -> None:
    engine = MockEngine()
    response, _ = await _post(tmp_path, messages_request(**fields), engine)
    message = anthropic_error(response, 400, "invalid_request_error")
    assert message.startswith(f"{path}: "), message
    assert "maxLength" in message
    assert engine.requests == []


async def test_a_schema_the_engine_keeps_reaches_it_as_response_format(tmp_path: Path) -> None:
    engine = _engine(completion('{"name": "Tom"}'))
    body = messages_request(output_config={"format": {"type": "json_schema", "schema": CAT}})
    response, _ = await _post(tmp_path, body, engine)
    assert response.status_code == 200, response.text
    sent = json.loads(engine.requests[0].content)
    assert sent["response_format"]["json_schema"]["schema"] == CAT
    assert response.json()["content"] == [{"type": "text", "text": '{"name": "Tom"}'}]


# The answer, whole.
@pytest.mark.parametrize(
    ("fields", "answer", "param", "code"),
    [
        (
            {"tools": [WEATHER]},
            _called('{"city": 7}'),
            "content[0].input.city",
            "answer_violates_schema",
        ),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "any"}},
            completion("Sunny."),
            "content",
            "answer_violates_tool_choice",
        ),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": CAT}}},
            completion('{"nom": "Tom"}'),
            "content[0].text",
            "answer_violates_schema",
        ),
    ],
)
async def test_an_answer_that_breaks_the_request_is_anthropics_api_error(
    tmp_path: Path, fields: dict[str, Any], answer: dict[str, Any], param: str, code: str
) -> None:
    response, recorder = await _post(tmp_path, messages_request(**fields), _engine(answer))
    message = anthropic_error(response, 500, "api_error")
    assert message.startswith(anthropic_path(param) + ": "), message  # Anthropic's form
    (record,) = recorder.finished_exchanges
    (violation,) = record.answers
    assert isinstance(violation, AnswerViolation)
    assert (violation.param, violation.code, violation.enforced) == (param, code, True)


async def test_report_only_sends_the_answer_and_records_the_violation(tmp_path: Path) -> None:
    body = messages_request(tools=[WEATHER])
    response, recorder = await _post(
        tmp_path, body, _engine(_called('{"city": 7}')), answers="report"
    )
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["input"] == {"city": 7}
    (record,) = recorder.finished_exchanges
    assert record.report is not None and record.answers[0].param == "content[0].input.city"


# The answer, streamed: the blocks go out, the end waits for the check.
def _streamed(arguments: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse(
            {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}
        )

    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    pieces = [
        chunk({"role": "assistant", "tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk({}, "tool_calls"),
    ]
    return b"".join(pieces) + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("arguments", "broken"), [('{"city": "Oslo"}', False), ('{"city": 7}', True)]
)
async def test_a_streamed_answer_is_checked_before_its_end(
    tmp_path: Path, arguments: str, broken: bool
) -> None:
    engine = MockEngine(
        lambda request: httpx.Response(
            200, content=_streamed(arguments), headers={"content-type": "text/event-stream"}
        )
    )
    body = messages_request(tools=[WEATHER], stream=True)
    response, _ = await _post(tmp_path, body, engine)
    assert response.status_code == 200
    names = [name for name, _ in anthropic_events(response.text)]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert "content_block_stop" in names
    if broken:
        assert names[-1] == "error" and "message_stop" not in names and "message_delta" not in names
        error = anthropic_events(response.text)[-1][1]["error"]
        assert error["type"] == "api_error" and "content.0.input.city" in error["message"]
    else:
        assert names[-2:] == ["message_delta", "message_stop"]


async def test_a_native_answer_is_checked_too(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": 7}}
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [use],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    engine = _engine(answer)
    more: dict[tuple[str, ...], Any] = {("upstream", "messages"): "native"}
    response, _ = await _post(tmp_path, messages_request(tools=[WEATHER]), engine, more=more)
    assert "content.0.input.city" in anthropic_error(response, 500, "api_error")
    assert engine.requests[0].url.path == MESSAGES_PATH


def _native_stream(partial_json: str) -> bytes:
    start: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 0},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    events = [
        anthropic_event("message_start", message=start),
        anthropic_event("content_block_start", index=0, content_block=block),
        anthropic_event(
            "content_block_delta",
            index=0,
            delta={"type": "input_json_delta", "partial_json": partial_json},
        ),
        anthropic_event("content_block_stop", index=0),
        anthropic_event(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 5},
        ),
        anthropic_event("message_stop"),
    ]
    return "".join(events).encode()


@pytest.mark.parametrize(
    ("partial", "broken"), [('{"city": "Oslo"}', False), ('{"city": 7}', True)]
)
async def test_a_native_stream_is_checked_before_its_end(
    tmp_path: Path, partial: str, broken: bool
) -> None:
    engine = MockEngine(
        lambda request: httpx.Response(
            200, content=_native_stream(partial), headers={"content-type": "text/event-stream"}
        )
    )
    more: dict[tuple[str, ...], Any] = {("upstream", "messages"): "native"}
    body = messages_request(tools=[WEATHER], stream=True)
    response, _ = await _post(tmp_path, body, engine, more=more)
    assert response.status_code == 200
    events = anthropic_events(response.text)
    names = [name for name, _ in events]
    assert names[:4] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ]
    if broken:
        assert names[4:] == ["error"]
        assert "content.0.input.city" in events[-1][1]["error"]["message"]
    else:
        assert names[4:] == ["message_delta", "message_stop"]
