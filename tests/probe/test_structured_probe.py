"""The probe below the field against the reference engine with structured outputs and
tools on: one keyword dropped is found ignored (with its count and rate) and every other
honoured; the policy it writes refuses a schema using that keyword at its path, in each
place a schema stands, and passes one without it; each tool-choice defect is found and
refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.probe import keywords, tools
from gateway.probe.client import EngineClient
from gateway.probe.responses import RESPONSES
from gateway.probe.route import CHAT
from gateway.probe.runner import ProbeResult, planned_requests, probe_engine
from gateway.probe.structured import StructuredProbe
from gateway.probe.verdict import HONOURED, IGNORED, INCONCLUSIVE, REJECTED, Verdict
from gateway.probe.writer import render_policy
from gateway.routes import MESSAGES
from refengine import create_app as create_engine
from refengine.structured.options import StructuredOptions
from refengine.structured.schema import SchemaRules
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.servers import ServerThread

DROPPED = "maxLength"
# What the reference engine does not honour, whatever is dropped (docs/refengine-structured.md).
NOT_HONOURED = {"propertyNames": IGNORED, "patternProperties": REJECTED}


def _probe(options: StructuredOptions) -> ProbeResult:
    # /v1/responses and /v1/messages too: the reference engine has neither, so their
    # rules follow chat's.
    routes = [CHAT, RESPONSES, MESSAGES]
    with ServerThread(create_engine(structured=options)) as engine:
        budget = planned_requests(routes)
        with EngineClient(engine.url, timeout=30, max_requests=budget) as client:
            return probe_engine(
                client, upstream=engine.url, model=MODEL, routes=routes, extra=NO_THINKING
            )


@pytest.fixture(scope="module")
def dropped() -> Iterator[tuple[ProbeResult, Policy]]:
    options = StructuredOptions(
        response_format=True, tools=True, schema=SchemaRules(drop=frozenset({DROPPED}))
    )
    result = _probe(options)
    policy = Policy(parse_policy_text(render_policy(result), file="<written>"))
    yield result, policy


def _below(result: ProbeResult) -> StructuredProbe:
    assert result.structured is not None
    return result.structured


def test_the_dropped_keyword_is_ignored_and_every_other_honoured(
    dropped: tuple[ProbeResult, Policy],
) -> None:
    result, _ = dropped
    found = {v.field: v for v in _below(result).keywords}
    assert set(found) == {c.name for c in keywords.CASES}
    outcomes = {name: v.outcome for name, v in found.items()}
    expected = {c.name: HONOURED for c in keywords.CASES} | NOT_HONOURED
    expected |= {c.name: IGNORED for c in keywords.CASES if c.keyword == DROPPED}
    assert outcomes == expected
    maxlength = found[DROPPED]
    assert maxlength.rate is not None and maxlength.rate > 0.5
    assert f"of {keywords.SAMPLES} answers broke it" in maxlength.summary
    honoured = found["minLength"]
    assert honoured.confidence is not None and honoured.confidence >= 0.9
    assert "without it" in honoured.summary


def _schema_body(schema: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer in JSON."}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema, "strict": True},
        },
    }


def _tool_body(parameters: Any) -> dict[str, Any]:
    function = {"name": "lookup", "parameters": parameters}
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Look it up."}],
        "tools": [{"type": "function", "function": function}],
    }


def _person(**name: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"type": "string", **name}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }


def _text_body(schema: Any) -> dict[str, Any]:
    text = {"format": {"type": "json_schema", "name": "person", "schema": schema}}
    return {"model": MODEL, "input": "Answer in JSON.", "text": text}


def _responses_tool_body(parameters: Any) -> dict[str, Any]:
    tool = {"type": "function", "name": "lookup", "parameters": parameters}
    return {"model": MODEL, "input": "Look it up.", "tools": [tool]}


def _messages_format_body(schema: Any) -> dict[str, Any]:
    config = {"format": {"type": "json_schema", "schema": schema}}
    return {**_MESSAGES_BODY, "output_config": config}


def _messages_tool_body(schema: Any) -> dict[str, Any]:
    return {**_MESSAGES_BODY, "tools": [{"name": "lookup", "input_schema": schema}]}


_MESSAGES_BODY: Any = {
    "model": MODEL,
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Look it up."}],
}


@pytest.mark.parametrize(
    ("route", "body", "where"),
    [
        (CHAT, _schema_body, "response_format.json_schema.schema"),
        (CHAT, _tool_body, "tools[0].function.parameters"),
        (RESPONSES, _text_body, "text.format.schema"),
        (RESPONSES, _responses_tool_body, "tools[0].parameters"),
        (MESSAGES, _messages_format_body, "output_config.format.schema"),
        (MESSAGES, _messages_tool_body, "tools[0].input_schema"),
    ],
)
def test_the_written_policy_refuses_the_dropped_keyword_at_its_path(
    dropped: tuple[ProbeResult, Policy], route: str, body: Any, where: str
) -> None:
    _, policy = dropped
    refused = apply_policy(policy, route, body(_person(maxLength=12)))
    assert refused.error is not None
    assert refused.error.param == f"{where}.properties.name.maxLength"
    assert "maxLength" in refused.error.message
    passed = apply_policy(policy, route, body(_person(minLength=2, pattern="^[A-Z]")))
    assert passed.error is None, passed.error


def test_the_written_policy_passes_tools_and_checks_answers(
    dropped: tuple[ProbeResult, Policy],
) -> None:
    result, policy = dropped
    below = _below(result)
    assert {v.field: v.outcome for v in below.tools} == {f: HONOURED for f in tools.FIELDS}
    named = {"type": "function", "function": {"name": "lookup"}}
    for choice in ("none", "auto", "required", named):
        body = _tool_body(_person()) | {"tool_choice": choice, "parallel_tool_calls": False}
        decision = apply_policy(policy, CHAT, body)
        assert decision.error is None, (choice, decision.error)
    text = render_policy(result)
    assert "answers: {schema: enforce, tool_arguments: enforce" in text
    assert "&engine-schema" in text and "*engine-schema" in text
    # The Messages API, translated: its tool choices, a tool exchange, answers checked.
    compiled = policy.route(MESSAGES)
    assert compiled is not None and compiled.answers is not None
    choices: list[dict[str, Any]] = [
        {"type": "auto"},
        {"type": "any"},
        {"type": "tool", "name": "lookup"},
    ]
    for kind in choices:
        body = _messages_tool_body(_person()) | {
            "tool_choice": {**kind, "disable_parallel_tool_use": True}
        }
        decision = apply_policy(policy, MESSAGES, body)
        assert decision.error is None, (kind, decision.error)
    # A tool exchange follows chat's verdict on tool messages (what tool_result becomes).
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"name": "Ada"}}
    result_block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}
    exchange = [
        *_MESSAGES_BODY["messages"],
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result_block]},
    ]
    chat = result.route(CHAT)
    held = chat.verdict("tool message") if chat is not None else None
    decision = apply_policy(
        policy, MESSAGES, _messages_tool_body(_person()) | {"messages": exchange}
    )
    if held is not None and held.outcome == HONOURED:
        assert decision.error is None, decision.error
    else:
        assert decision.error is not None
        assert decision.error.param == "messages[1].content[0].type"
        assert "tool messages" in decision.error.message
    refused = apply_policy(
        policy,
        MESSAGES,
        _messages_tool_body(_person())
        | {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    )
    assert refused.error is not None and refused.error.param == "tools[0].type"


def test_tool_choice_defects_are_found_and_refused() -> None:
    options = StructuredOptions(
        tools=True,
        prose_for_required=True,
        ignore_named_choice=True,
        ignore_parallel_false=True,
        ignore_choice_none=True,
    )
    result = _probe(options)
    outcomes = {v.field: v.outcome for v in _below(result).tools}
    assert outcomes == {
        tools.AUTO: HONOURED,
        tools.REQUIRED: IGNORED,
        tools.NAMED: IGNORED,
        tools.NONE: IGNORED,
        tools.PARALLEL: IGNORED,
        tools.ARGUMENTS: HONOURED,
    }
    required = _below(result).tool(tools.REQUIRED)
    assert required is not None and "prose, finish_reason tool_calls" in required.summary
    # No JSON mode: the keyword cases' gate (one plain schema) says so for every case.
    keywords = _below(result).keywords
    assert keywords and {v.outcome for v in keywords} == {IGNORED}
    assert all(v.summary.startswith("json_schema: a plain schema") for v in keywords)
    assert not _below(result).schema_honoured()
    policy = Policy(parse_policy_text(render_policy(result), file="<written>"))
    base = _tool_body({})  # no keyword: nothing for the unmeasured table to refuse
    assert apply_policy(policy, CHAT, base | {"tool_choice": "auto"}).error is None
    for field, value in (
        ("tool_choice", "required"),
        ("tool_choice", "none"),
        ("tool_choice", {"type": "function", "function": {"name": "lookup"}}),
        ("parallel_tool_calls", False),
    ):
        error = apply_policy(policy, CHAT, base | {field: value}).error
        assert error is not None and error.param == field, (field, value)
    # No keyword was measured: a parameters schema that names one is refused.
    error = apply_policy(policy, CHAT, _tool_body(_person())).error
    assert error is not None and (error.param or "").startswith("tools[0].function.parameters")


def test_an_inconclusive_json_object_leaves_json_schema_to_its_keywords(
    dropped: tuple[ProbeResult, Policy],
) -> None:
    # A small model's one json_object answer cut by max_tokens is inconclusive (as on
    # llama.cpp's server, from run to run): json_object is refused, json_schema still
    # passes or is refused by each keyword's own verdict, and answers stay checked.
    result, _ = dropped
    chat = result.route(CHAT)
    assert chat is not None
    index = next(i for i, v in enumerate(chat.verdicts) if v.field == "response_format")
    cut = Verdict("response_format", INCONCLUSIVE, "json_object: the text was cut by max_tokens")
    verdicts = [*chat.verdicts[:index], cut, *chat.verdicts[index + 1 :]]
    routes = [replace(r, verdicts=verdicts) if r.route == CHAT else r for r in result.routes]
    text = render_policy(replace(result, routes=routes))
    assert "answers: {schema: enforce, tool_arguments: enforce" in text
    policy = Policy(parse_policy_text(text, file="<written>"))
    refused = apply_policy(policy, CHAT, _schema_body(_person(maxLength=12))).error
    assert refused is not None
    assert refused.param == "response_format.json_schema.schema.properties.name.maxLength"
    assert apply_policy(policy, CHAT, _schema_body(_person(minLength=2))).error is None
    json_object = _schema_body({}) | {"response_format": {"type": "json_object"}}
    error = apply_policy(policy, CHAT, json_object).error
    assert error is not None and (error.param or "").startswith("response_format"), error
