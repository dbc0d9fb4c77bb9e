"""Answer checks end to end: the openai SDK -> the gateway (answer checks enforced) -> an
engine whose answer breaks what was asked, whole and streamed; the client gets the
gateway's error, never a 200 with bad data (tests/fixtures/policies/structured.yaml)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest

from gateway.observe.logs import request_record
from tests.support.gateways import Gateway, gateway_settings, serve_gateway
from tests.support.schemas import MESSAGES, MODEL, STRUCTURED, person
from tests.support.scriptedengine import Script, scripted_engine
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
PERSON = person(name={"type": "string"}, age={"type": "integer"})
FORMAT: Any = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
WEATHER = person(city={"type": "string"})
TOOLS: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]


@asynccontextmanager
async def serving(
    script: Script, *, native: bool = False
) -> AsyncIterator[tuple[openai.AsyncOpenAI, Gateway]]:
    flags: dict[tuple[str, ...], Any] = {("upstream", "responses"): "native"} if native else {}
    async with running_server(scripted_engine(script)) as engine:
        settings = gateway_settings(engine, policy=STRUCTURED, overrides=flags)
        async with serve_gateway(settings) as gateway, sdk(gateway.url) as client:
            yield client, gateway


def error_of(exc: openai.APIError) -> dict[str, Any]:
    body: Any = exc.body
    return body.get("error", body) if isinstance(body, dict) else {}


# (what, the engine's answer, the request's fields, code, param, keyword)
BROKEN: list[tuple[str, Script, dict[str, Any], str, str, str | None]] = [
    (
        "content missing a required property",
        Script(content='{"name": "Ada"}'),
        {"response_format": FORMAT},
        "answer_violates_schema",
        "choices[0].message.content",
        "required",
    ),
    (
        "content of the wrong type",
        Script(content='{"name": "Ada", "age": "old"}'),
        {"response_format": FORMAT},
        "answer_violates_schema",
        "choices[0].message.content.age",
        "type",
    ),
    (
        "content that is not JSON",
        Script(content="Ada is 36."),
        {"response_format": FORMAT},
        "answer_violates_schema",
        "choices[0].message.content",
        None,
    ),
    (
        "json_object answered with an array",
        Script(content="[1, 2]"),
        {"response_format": {"type": "json_object"}},
        "answer_violates_schema",
        "choices[0].message.content",
        "type",
    ),
    (
        "a required tool call answered with prose",
        Script(content="It is sunny in Paris."),
        {"tools": TOOLS, "tool_choice": "required"},
        "answer_violates_tool_choice",
        "choices[0].message.tool_calls",
        None,
    ),
    (
        "a named tool call answered with prose",
        Script(content="It is sunny."),
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        "answer_violates_tool_choice",
        "choices[0].message.tool_calls",
        None,
    ),
    (
        "tool arguments breaking the parameters",
        Script(calls=[("get_weather", '{"city": 7}')]),
        {"tools": TOOLS},
        "answer_violates_schema",
        "choices[0].message.tool_calls[0].function.arguments.city",
        "type",
    ),
    (
        "a call of a tool the request does not define",
        Script(calls=[("get_time", "{}")]),
        {"tools": TOOLS},
        "answer_violates_tool_choice",
        "choices[0].message.tool_calls[0].function.name",
        None,
    ),
    (
        "two calls where one was asked for",
        Script(calls=[("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": "Rome"}')]),
        {"tools": TOOLS, "parallel_tool_calls": False},
        "answer_violates_parallel_tool_calls",
        "choices[0].message.tool_calls[1]",
        None,
    ),
]
IDS = [row[0] for row in BROKEN]


@pytest.mark.parametrize(("what", "script", "fields", "code", "param", "keyword"), BROKEN, ids=IDS)
async def test_a_whole_answer_that_breaks_the_request_is_a_502(
    what: str, script: Script, fields: dict[str, Any], code: str, param: str, keyword: str | None
) -> None:
    async with serving(script) as (client, gateway):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=MODEL, messages=MESSAGES, **fields)
        assert caught.value.status_code == 502
        error = error_of(caught.value)
        assert (error["code"], error["param"], error["type"]) == (code, param, "upstream_error")
        if keyword is not None:
            assert f"keyword '{keyword}'" in error["message"]
        (exchange,) = gateway.recorder.finished_exchanges
        assert exchange.status == 502 and exchange.error_code == code
        line = request_record(exchange, time.perf_counter())
        assert line["answer"]["code"] == code and line["answer"]["enforced"] is True
        assert line["answer"]["param"] == param and line["answer"]["keyword"] == keyword


@pytest.mark.parametrize(("what", "script", "fields", "code", "param", "keyword"), BROKEN, ids=IDS)
async def test_a_stream_that_breaks_the_request_ends_with_the_gateways_error(
    what: str, script: Script, fields: dict[str, Any], code: str, param: str, keyword: str | None
) -> None:
    async with serving(script) as (client, gateway):
        stream = await client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, **fields
        )
        seen: list[Any] = []
        with pytest.raises(openai.APIError) as caught:
            async for chunk in stream:
                seen.append(chunk)
        error: Any = caught.value.body
        assert (error["code"], error["param"]) == (code, param)
        # The content was relayed as it came; the end (finish_reason) never came.
        text = "".join(c.choices[0].delta.content or "" for c in seen if c.choices)
        assert text == (script.content or "")
        assert all(c.choices[0].finish_reason is None for c in seen if c.choices)
        (exchange,) = gateway.recorder.finished_exchanges
        assert exchange.error_code == code and exchange.status == 200


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_that_keeps_the_request_goes_through_unchanged(stream: bool) -> None:
    script = Script(content='{"name": "Ada", "age": 36}')
    async with serving(script) as (client, gateway):
        if stream:
            chunks = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, response_format=FORMAT, stream=True
            )
            pieces = [c async for c in chunks]
            assert "".join(c.choices[0].delta.content or "" for c in pieces if c.choices) == (
                script.content
            )
            assert pieces[-1].choices[0].finish_reason == "stop"
        else:
            answer = await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, response_format=FORMAT
            )
            assert json.loads(answer.choices[0].message.content or "") == {"name": "Ada", "age": 36}
        (exchange,) = gateway.recorder.finished_exchanges
        assert exchange.answers == () and exchange.status == 200


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_overlay_only_reports_and_the_answer_goes_as_the_engine_gave_it(
    stream: bool,
) -> None:
    script = Script(content='{"name": "Ada"}')
    async with serving(script) as (client, gateway):
        if stream:
            chunks = await client.chat.completions.create(
                model="trial-model", messages=MESSAGES, response_format=FORMAT, stream=True
            )
            pieces = [c async for c in chunks]
            assert pieces[-1].choices[0].finish_reason == "stop"
        else:
            answer = await client.chat.completions.create(
                model="trial-model", messages=MESSAGES, response_format=FORMAT
            )
            assert answer.choices[0].message.content == '{"name": "Ada"}'
        (exchange,) = gateway.recorder.finished_exchanges
        assert exchange.status == 200 and exchange.error_code is None
        assert [(v.code, v.enforced) for v in exchange.answers] == [
            ("answer_violates_schema", False)
        ]
        assert exchange.report is not None
        assert [(o.field, o.detail) for o in exchange.report.fields] == [
            ("choices[0].message.content", "answer_violates_schema")
        ]
        line = request_record(exchange, time.perf_counter())
        assert line["reported"]["status"] == 502
        assert line["answer"]["enforced"] is False


async def test_each_choice_of_a_fan_out_is_checked() -> None:
    script = Script(content='{"name": "Ada"}')
    async with serving(script) as (client, _):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, response_format=FORMAT, n=2
            )
        assert error_of(caught.value)["code"] == "answer_violates_schema"


RESPONSES_FORMAT: Any = {"format": {"type": "json_schema", "name": "person", "schema": PERSON}}


async def test_a_responses_answer_that_breaks_text_format_is_a_502() -> None:
    async with serving(Script(content='{"name": 5, "age": 1}')) as (client, _):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.responses.create(model=MODEL, input="Who?", text=RESPONSES_FORMAT)
        error = error_of(caught.value)
        assert caught.value.status_code == 502
        assert (error["code"], error["param"]) == (
            "answer_violates_schema",
            "output[0].content[0].text.name",
        )


async def test_a_responses_stream_that_breaks_text_format_fails_instead_of_completing() -> None:
    async with serving(Script(content='{"name": 5, "age": 1}')) as (client, _):
        stream = await client.responses.create(
            model=MODEL, input="Who?", text=RESPONSES_FORMAT, stream=True
        )
        events = [event async for event in stream]
        kinds = [event.type for event in events]
        assert "response.output_text.delta" in kinds
        assert "response.completed" not in kinds
        assert kinds[-2:] == ["error", "response.failed"]
        error: Any = events[-2]
        assert (error.code, error.param) == (
            "answer_violates_schema",
            "output[0].content[0].text.name",
        )


async def test_a_required_responses_tool_call_answered_with_prose_is_a_502() -> None:
    tools: Any = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    async with serving(Script(content="Sunny.")) as (client, _):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.responses.create(
                model=MODEL, input="Weather?", tools=tools, tool_choice="required"
            )
        error = error_of(caught.value)
        assert (error["code"], error["param"]) == ("answer_violates_tool_choice", "output")


@pytest.mark.parametrize("stream", [False, True])
async def test_native_responses_answers_are_checked_too(stream: bool) -> None:
    async with serving(Script(content='{"name": 5, "age": 1}'), native=True) as (client, gw):
        if stream:
            events = [
                e
                async for e in await client.responses.create(
                    model=MODEL, input="Who?", text=RESPONSES_FORMAT, stream=True
                )
            ]
            kinds = [e.type for e in events]
            assert "response.output_text.delta" in kinds and "response.completed" not in kinds
            assert kinds[-2:] == ["error", "response.failed"]
            error: Any = events[-2]
            assert error.code == "answer_violates_schema"
            assert [e.sequence_number for e in events] == list(range(len(events)))
        else:
            with pytest.raises(openai.APIStatusError) as caught:
                await client.responses.create(model=MODEL, input="Who?", text=RESPONSES_FORMAT)
            assert error_of(caught.value)["param"] == "output[0].content[0].text.name"
    async with serving(Script(content='{"name": "Ada", "age": 1}'), native=True) as (client, _):
        if stream:
            stream_ = await client.responses.create(
                model=MODEL, input="Who?", text=RESPONSES_FORMAT, stream=True
            )
            assert [e.type async for e in stream_][-1] == "response.completed"
        else:
            response = await client.responses.create(
                model=MODEL, input="Who?", text=RESPONSES_FORMAT
            )
            assert response.output_text == '{"name": "Ada", "age": 1}'
