"""The reference engine's structured outputs and tools on the wire, whole and streamed,
through the official SDK where a user would call it: honoured with the flags on,
ignored without them, and each defect flag doing what it names."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pydantic
import pytest

from refengine import create_app
from refengine.cli import parse_args, structured_options
from refengine.structured.options import StructuredOptions
from refengine.structured.schema import SchemaRules
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.sdk import sdk
from tests.support.servers import running_server
from tests.support.validating import errors

pytestmark = pytest.mark.anyio

CHAT = "/v1/chat/completions"
ON = StructuredOptions(response_format=True, tools=True)
CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days", "unit"],
    "additionalProperties": False,
}
ZONE = {
    "type": "object",
    "properties": {"zone": {"type": "string", "pattern": "^[A-Z][a-z]+/[A-Z][a-z]+$"}},
    "required": ["zone"],
    "additionalProperties": False,
}
TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": CITY}},
    {"type": "function", "function": {"name": "get_time", "parameters": ZONE}},
]
SCHEMAS = {"get_weather": CITY, "get_time": ZONE}
SEEDS = range(12)


def _chat(content: str = "Tell me about the weather.", **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **fields}


def _schema_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with running_server(create_app(structured=ON)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield http


async def _post(http: httpx.AsyncClient, body: dict[str, Any], status: int = 200) -> Any:
    response = await http.post(CHAT, json=body)
    assert response.status_code == status, response.text
    return response.json()


async def _stream(http: httpx.AsyncClient, body: dict[str, Any]) -> list[Any]:
    events: list[Any] = []
    async with http.stream("POST", CHAT, json=body | {"stream": True}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line:
                data = line.removeprefix("data: ")
                events.append(data if data == "[DONE]" else json.loads(data))
    assert events[-1] == "[DONE]"
    return events[:-1]


def _calls(body: Any) -> list[tuple[str, Any]]:
    message = body["choices"][0]["message"]
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]


def _streamed(events: list[Any]) -> tuple[str, list[dict[str, Any]], str | None]:
    """Content, tool calls put together from their deltas, and the finish reason."""
    content, calls, finish = "", [], None
    for event in events:
        choice = event["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for piece in delta.get("tool_calls") or []:
            if "id" in piece:
                calls.append(
                    {"id": piece["id"], "name": piece["function"]["name"], "arguments": ""}
                )
            calls[piece["index"]]["arguments"] += piece["function"]["arguments"]
        finish = choice["finish_reason"] or finish
    return content, calls, finish


async def test_off_by_default_the_fields_are_ignored_as_ft_serve_ignores_them() -> None:
    async with running_server(create_app()) as url, httpx.AsyncClient(base_url=url) as http:
        body = _chat(response_format=_schema_format(CITY), tools=TOOLS, tool_choice="required")
        answer = await _post(http, body | NO_THINKING | {"seed": 1})
    message = answer["choices"][0]["message"]
    assert "tool_calls" not in message and answer["choices"][0]["finish_reason"] != "tool_calls"
    with pytest.raises(ValueError):
        json.loads(message["content"])


async def test_json_schema_answers_follow_the_schema_and_a_seed_replays(
    client: httpx.AsyncClient,
) -> None:
    body = _chat(response_format=_schema_format(CITY), temperature=1.0)
    contents = []
    for seed in SEEDS:
        answer = await _post(client, body | {"seed": seed})
        assert answer["choices"][0]["finish_reason"] == "stop"
        content = answer["choices"][0]["message"]["content"]
        assert errors(CITY, json.loads(content)) == []
        assert list(json.loads(content)) == ["city", "days", "unit"]  # schema order
        contents.append(content)
    assert len(set(contents)) > len(contents) // 2
    replay = await _post(client, body | {"seed": 3})
    assert replay["choices"][0]["message"]["content"] == contents[3]
    streamed, calls, finish = _streamed(await _stream(client, body | {"seed": 3}))
    assert (streamed, calls, finish) == (contents[3], [], "stop")
    usage = replay["usage"]
    assert usage["completion_tokens"] > 5  # one a piece: words, spaces, punctuation
    greedy = {
        (await _post(client, body | {"temperature": 0, "seed": s}))["choices"][0]["message"][
            "content"
        ]
        for s in (1, 2)
    }
    assert len(greedy) == 1  # temperature 0: one answer, whatever the seed


class Weather(pydantic.BaseModel):
    """What the SDK's parse() asks for: its schema, strict."""

    city: str
    days: int = pydantic.Field(ge=1, le=7)
    tags: list[str] = pydantic.Field(max_length=3)


async def test_the_sdk_parses_a_strict_answer_into_its_model() -> None:
    async with running_server(create_app(structured=ON)) as url, sdk(url) as api:
        for seed in range(4):
            done = await api.chat.completions.parse(
                model=MODEL,
                messages=[{"role": "user", "content": "Weather?"}],
                response_format=Weather,
                seed=seed,
            )
            parsed = done.choices[0].message.parsed
            assert isinstance(parsed, Weather) and 1 <= parsed.days <= 7


async def test_json_object_mode(client: httpx.AsyncClient) -> None:
    for seed in range(6):
        answer = await _post(client, _chat(response_format={"type": "json_object"}, seed=seed))
        value = json.loads(answer["choices"][0]["message"]["content"])
        assert isinstance(value, dict) and value


async def test_max_tokens_cuts_the_json_and_stop_strings_apply(client: httpx.AsyncClient) -> None:
    body = _chat(response_format=_schema_format(CITY), seed=1)
    cut = await _post(client, body | {"max_tokens": 3})
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] == 3
    whole = (await _post(client, body))["choices"][0]["message"]["content"]
    stopped = await _post(client, body | {"stop": ['"days"']})
    assert stopped["choices"][0]["message"]["content"] == whole[: whole.index('"days"')]


async def test_required_and_named_calls_follow_the_parameters_whole_and_streamed(
    client: httpx.AsyncClient,
) -> None:
    for seed in SEEDS:
        body = _chat(tools=TOOLS, tool_choice="required", seed=seed, parallel_tool_calls=False)
        answer = await _post(client, body)
        assert answer["choices"][0]["finish_reason"] == "tool_calls"
        assert answer["choices"][0]["message"]["content"] is None
        [(name, arguments)] = _calls(answer)
        assert errors(SCHEMAS[name], arguments) == []
        content, calls, finish = _streamed(await _stream(client, body))
        assert (content, finish) == ("", "tool_calls")
        assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [(name, arguments)]
        named = _chat(
            tools=TOOLS,
            seed=seed,
            tool_choice={"type": "function", "function": {"name": "get_time"}},
        )
        [(name, arguments)] = _calls(await _post(client, named))
        assert name == "get_time" and errors(ZONE, arguments) == []


async def test_auto_none_and_parallel_calls(client: httpx.AsyncClient) -> None:
    both = "Use get_time, then get_weather."
    calls = _calls(await _post(client, _chat(both, tools=TOOLS, seed=1)))
    assert [name for name, _ in calls] == ["get_time", "get_weather"]
    one = _calls(await _post(client, _chat(both, tools=TOOLS, seed=1, parallel_tool_calls=False)))
    assert [name for name, _ in one] == ["get_time"]
    none = await _post(client, _chat(both, tools=TOOLS, tool_choice="none", seed=1) | NO_THINKING)
    assert "tool_calls" not in none["choices"][0]["message"]
    after = _chat(both, tools=TOOLS, seed=1)
    after["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Europe/Paris"},
    ]
    text = await _post(client, after)
    assert text["choices"][0]["finish_reason"] in ("stop", "length")
    assert "tool_calls" not in text["choices"][0]["message"]
    kinds = set()
    for seed in range(16):  # the prompt names no tool: a draw decides
        answer = await _post(client, _chat("Hello there.", tools=TOOLS, seed=seed) | NO_THINKING)
        kinds.add(answer["choices"][0]["finish_reason"] == "tool_calls")
    assert kinds == {True, False}


async def test_the_sdk_streams_tool_calls() -> None:
    async with running_server(create_app(structured=ON)) as url, sdk(url) as api:
        async with api.chat.completions.stream(
            model=MODEL,
            messages=[{"role": "user", "content": "get_weather please"}],
            tools=TOOLS,
            tool_choice="required",
            seed=5,
        ) as stream:
            async for _ in stream:
                pass
            done = await stream.get_final_completion()
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert errors(CITY, json.loads(call.function.arguments)) == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            _chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}}),
            "tool_choice.function.name",
        ),
        (_chat(tool_choice="required"), None),
        (_chat(tools=TOOLS, tool_choice="sometimes"), "tool_choice"),
        (_chat(tools=[{"type": "web_search"}]), "tools[0].type"),
        (
            _chat(tools=[{"type": "function", "function": {"name": "a b"}}]),
            "tools[0].function.name",
        ),
        (
            _chat(
                tools=[
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "string", "pattern": "(?=x)"},
                        },
                    }
                ]
            ),
            "tools[0].function.parameters",
        ),
        (_chat(response_format={"type": "xml"}), "response_format.type"),
        (
            _chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"schema": {"type": "integr"}},
                }
            ),
            "response_format.json_schema.schema",
        ),
        (_chat(tools=TOOLS, parallel_tool_calls="yes"), "parallel_tool_calls"),
    ],
)
async def test_bad_structured_requests_get_a_400_at_their_field(
    client: httpx.AsyncClient, body: dict[str, Any], param: str | None
) -> None:
    error = (await _post(client, body, 400))["error"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    else:
        assert error["param"] == "tool_choice"


async def _with(options: StructuredOptions, body: dict[str, Any], status: int = 200) -> Any:
    async with running_server(create_app(structured=options)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            return await _post(http, body, status)


async def test_refused_and_crashing_keywords() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}}
    refused = await _with(
        StructuredOptions(
            response_format=True, schema=SchemaRules(reject=frozenset({"maxLength"}))
        ),
        _chat(response_format=_schema_format(schema)),
        400,
    )
    assert refused["error"]["param"] == "response_format.json_schema.schema"
    assert "properties.a.maxLength" in refused["error"]["message"]
    crashed = await _with(
        StructuredOptions(response_format=True, schema=SchemaRules(crash=frozenset({"maxLength"}))),
        _chat(response_format=_schema_format(schema)),
        500,
    )
    assert crashed["error"]["type"] == "server_error"


async def test_a_dropped_keyword_shows_in_the_answers() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 2}},
        "required": ["a"],
        "additionalProperties": False,
    }
    options = StructuredOptions(
        response_format=True, schema=SchemaRules(drop=frozenset({"maxLength"}))
    )
    async with running_server(create_app(structured=options)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            broken = 0
            for seed in SEEDS:
                answer = await _post(http, _chat(response_format=_schema_format(schema), seed=seed))
                assert answer["choices"][0]["finish_reason"] == "stop"
                broken += bool(
                    errors(schema, json.loads(answer["choices"][0]["message"]["content"]))
                )
    assert broken >= len(SEEDS) // 2


async def test_defect_prose_for_required() -> None:
    options = StructuredOptions(tools=True, prose_for_required=True)
    answer = await _with(options, _chat(tools=TOOLS, tool_choice="required", seed=2) | NO_THINKING)
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert "tool_calls" not in choice["message"] and choice["message"]["content"]


async def test_defect_ignored_named_choice_parallel_false_and_none() -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    options = StructuredOptions(tools=True, ignore_named_choice=True)
    answer = await _with(
        options, _chat("Call get_weather.", tools=TOOLS, tool_choice=named, seed=1)
    )
    assert [n for n, _ in _calls(answer)] == ["get_weather"]  # taken as auto
    both = _chat("get_time and get_weather", tools=TOOLS, seed=1, parallel_tool_calls=False)
    options = StructuredOptions(tools=True, ignore_parallel_false=True)
    assert len(_calls(await _with(options, both))) == 2
    options = StructuredOptions(tools=True, ignore_choice_none=True)
    assert (
        len(
            _calls(
                await _with(options, both | {"tool_choice": "none", "parallel_tool_calls": True})
            )
        )
        == 2
    )


async def test_defect_json_mode_whitespace_without_json_in_the_prompt() -> None:
    options = StructuredOptions(response_format=True, json_whitespace=True)
    body = _chat("Describe a cat.", response_format={"type": "json_object"}, max_tokens=20)
    answer = await _with(options, body)
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["choices"][0]["message"]["content"] == "{" + "\n" * 19
    asked = await _with(
        options,
        body | {"messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": 256},
    )
    assert isinstance(json.loads(asked["choices"][0]["message"]["content"]), dict)


def test_the_command_line_flags() -> None:
    args = parse_args(
        [
            "--structured-outputs",
            "--tools",
            "--drop-keywords",
            "uniqueItems,maxLength",
            "--reject-keywords",
            "not",
            "--crash-keywords",
            "pattern",
            "--reject-unknown-keywords",
            "--prose-for-required",
            "--ignore-named-choice",
            "--ignore-parallel-false",
            "--ignore-choice-none",
            "--json-whitespace",
        ]
    )
    assert structured_options(args) == StructuredOptions(
        response_format=True,
        tools=True,
        schema=SchemaRules(
            drop=frozenset({"uniqueItems", "maxLength"}),
            reject=frozenset({"not"}),
            crash=frozenset({"pattern"}),
            reject_unknown=True,
        ),
        prose_for_required=True,
        ignore_named_choice=True,
        ignore_parallel_false=True,
        ignore_choice_none=True,
        json_whitespace=True,
    )
    assert structured_options(parse_args([])) == StructuredOptions()
    with pytest.raises(SystemExit):
        parse_args(["--drop-keywords", "propertyNames"])
