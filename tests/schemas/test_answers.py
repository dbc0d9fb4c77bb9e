"""The answer checks as pure functions: what is checked, what is not, the layering of
``answers`` over overlays, and a stream put together from its chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file
from gateway.schemas.answers import check_chat, check_response
from gateway.schemas.expect import Answers, Expectation, answers_of, expectation
from gateway.schemas.rules import AnswerChecks
from gateway.schemas.streamed import StreamedChat
from tests.support.schemas import CHAT, RESPONSES, STRUCTURED, formatted, person

POLICY = Policy(load_policy_file(STRUCTURED)[0])
PERSON = person(name={"type": "string"}, age={"type": "integer"})
ALL = Answers("enforce", "enforce", "enforce", "enforce")


def chat_answer(content: Any = None, calls: Any = (), finish: str = "stop", **message: Any) -> Any:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls)
    ]
    body = {"role": "assistant", "content": content, **message}
    if tool_calls:
        body["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "message": body, "finish_reason": finish}]}


def expect(**fields: Any) -> Expectation:
    found = expectation(ALL, CHAT, {"model": "m", "messages": [], **fields})
    assert found is not None
    return found


FORMAT = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": person(x={"type": "integer"})}}
]


@pytest.mark.parametrize(
    ("what", "fields", "answer", "found"),
    [
        (
            "a conforming answer",
            {"response_format": FORMAT},
            chat_answer('{"name": "a", "age": 1}'),
            [],
        ),
        (
            "cut by max_tokens: not checked",
            {"response_format": FORMAT},
            chat_answer('{"name": "a', finish="length"),
            [],
        ),
        (
            "a content filter: not checked",
            {"response_format": FORMAT},
            chat_answer("{", finish="content_filter"),
            [],
        ),
        (
            "a refusal: not checked",
            {"response_format": FORMAT},
            chat_answer(None, refusal="I cannot."),
            [],
        ),
        (
            "a missing property",
            {"response_format": FORMAT},
            chat_answer('{"name": "a"}'),
            [("answer_violates_schema", "choices[0].message.content", "required")],
        ),
        (
            "json_object, not JSON",
            {"response_format": {"type": "json_object"}},
            chat_answer("hi"),
            [("answer_violates_schema", "choices[0].message.content", None)],
        ),
        (
            "json_object, an object",
            {"response_format": {"type": "json_object"}},
            chat_answer("{}"),
            [],
        ),
        (
            "text format: nothing asked",
            {"response_format": {"type": "text"}},
            chat_answer("hi"),
            None,
        ),
        (
            "required, a call",
            {"tools": TOOLS, "tool_choice": "required"},
            chat_answer(None, [("f", '{"x": 1}')]),
            [],
        ),
        (
            "required, prose",
            {"tools": TOOLS, "tool_choice": "required"},
            chat_answer("no"),
            [("answer_violates_tool_choice", "choices[0].message.tool_calls", None)],
        ),
        (
            "named, another tool",
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "f"}}},
            chat_answer(None, [("g", "{}")]),
            [
                ("answer_violates_tool_choice", "choices[0].message.tool_calls", None),
                (
                    "answer_violates_tool_choice",
                    "choices[0].message.tool_calls[0].function.name",
                    None,
                ),
            ],
        ),
        (
            "arguments not JSON",
            {"tools": TOOLS},
            chat_answer(None, [("f", "{x")]),
            [
                (
                    "answer_violates_schema",
                    "choices[0].message.tool_calls[0].function.arguments",
                    None,
                )
            ],
        ),
        (
            "arguments off the parameters",
            {"tools": TOOLS},
            chat_answer(None, [("f", '{"x": "1"}')]),
            [
                (
                    "answer_violates_schema",
                    "choices[0].message.tool_calls[0].function.arguments.x",
                    "type",
                )
            ],
        ),
        (
            "one call asked, two made",
            {"tools": TOOLS, "parallel_tool_calls": False},
            chat_answer(None, [("f", '{"x": 1}'), ("f", '{"x": 2}')]),
            [("answer_violates_parallel_tool_calls", "choices[0].message.tool_calls[1]", None)],
        ),
        (
            "tools with a schema format: calls instead of content",
            {"tools": TOOLS, "response_format": FORMAT},
            chat_answer(None, [("f", '{"x": 1}')]),
            [],
        ),
    ],
)
def test_what_a_chat_answer_is_checked_for(
    what: str, fields: dict[str, Any], answer: Any, found: list[tuple[str, str, str | None]] | None
) -> None:
    asked = expectation(ALL, CHAT, {"model": "m", "messages": [], **fields})
    if found is None:
        assert asked is None
        return
    assert asked is not None
    assert [(v.code, v.param, v.keyword) for v in check_chat(asked, answer)] == found


def test_a_responses_answer_is_read_by_its_output_items() -> None:
    body = {
        "model": "m",
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "p", "schema": PERSON}},
    }
    asked = expectation(ALL, RESPONSES, body)
    assert asked is not None
    part = {"type": "output_text", "text": '{"name": 1, "age": 1}'}
    response = {
        "status": "completed",
        "output": [{"type": "reasoning"}, {"type": "message", "content": [part]}],
    }
    (violation,) = check_response(asked, response)
    assert violation.param == "output[1].content[0].text.name"
    assert check_response(asked, {**response, "status": "incomplete"}) == []
    refusal = {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}
    assert check_response(asked, {"status": "completed", "output": [refusal]}) == []


def test_a_report_only_check_reports() -> None:
    asked = expectation(Answers(schema="report"), CHAT, formatted(PERSON))
    assert asked is not None
    (violation,) = check_chat(asked, chat_answer("{}"))
    assert violation.enforced is False


def test_overlays_lay_their_checks_key_by_key() -> None:
    layers = [
        AnswerChecks.model_validate({"schema": "enforce", "tool_choice": "enforce"}),
        AnswerChecks.model_validate({"schema": "report"}),
        AnswerChecks.model_validate({"tool_choice": "off"}),
    ]
    assert answers_of(layers) == Answers(schema="report", tool_choice="off")
    assert answers_of([AnswerChecks.model_validate({"schema": "off"})]) is None
    body = formatted(PERSON, tools=[], tool_choice="required")
    assert apply_policy(POLICY, CHAT, body).expect is not None
    trial = apply_policy(POLICY, CHAT, {**body, "model": "trial-model"}).expect
    assert trial is not None and trial.answers.schema == "report"
    assert trial.answers.tool_choice == "report" and trial.answers.tool_arguments == "enforce"
    assert apply_policy(POLICY, CHAT, body, profile="lax").expect is None


def test_a_request_without_anything_to_check_builds_nothing() -> None:
    decision = apply_policy(
        POLICY, CHAT, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert decision.error is None and decision.expect is None
    assert (
        apply_policy(POLICY, CHAT, formatted({"type": "object", "maxLength": 1})).expect is None
    )  # refused


def test_a_stream_is_put_together_as_a_whole_answer() -> None:
    streamed = StreamedChat()
    chunks: list[Any] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": '{"name"'}}]},
        {"choices": [{"index": 0, "delta": {"content": ': "a"}'}}]},
        {
            "choices": [
                {
                    "index": 1,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 1,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 1,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                }
            ]
        },
    ]
    assert not any(streamed.feed(c) for c in chunks)
    assert streamed.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    streamed.feed({"choices": [{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]})
    answer = streamed.answer()
    first, second = answer["choices"]
    assert json.loads(first["message"]["content"]) == {"name": "a"}
    assert second["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    asked = expect(response_format=FORMAT, tools=TOOLS)
    assert [v.param for v in check_chat(asked, answer)] == ["choices[0].message.content"]
