"""An engine's answer checked against what its request asked (expect.py's Expectation).

A grammar backend that drops a keyword answers 200 with JSON that breaks the schema;
a tool mode can answer prose where a call was required (shared/STRUCTURED-OUTPUTS.md
sections 3, 6, 8). Four checks, each off, report or enforce by the policy: a finished
answer's content against its response format (``finish_reason: "stop"``; Responses:
``status: "completed"``); each tool call's arguments against its tool's parameters
(and a call to no tool the request defines); ``tool_choice`` "required" or named,
answered without that call; ``parallel_tool_calls: false`` answered with several.
An answer cut short (``length``, ``content_filter``, an incomplete response) or a
refusal is not checked: its JSON may be partial, as OpenAI says. Each violation is an
AnswerViolation naming the path in the client's answer and the keyword. A Messages
API answer (``check_message``) is read by its content blocks: its text, each
``tool_use`` block's input.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import AnswerViolation
from gateway.schemas.check import schema_path
from gateway.schemas.expect import ENFORCE, JSON_OBJECT, OFF, Expectation
from gateway.schemas.validator import first_error, validator

# A call as the checks read it: its name, its arguments' text, and their paths.
Call = tuple[Any, Any, str, str]
_CUT = frozenset({"length", "content_filter"})
_MESSAGE_CUT = frozenset({"max_tokens", "refusal", "model_context_window_exceeded"})


def _violation(
    setting: str, message: str, *, param: str, code: str, check: str, keyword: str | None = None
) -> AnswerViolation:
    return AnswerViolation(
        message, param=param, code=code, check=check, keyword=keyword, enforced=setting == ENFORCE
    )


def check_chat(expect: Expectation, answer: Any) -> list[AnswerViolation]:
    """The violations in a whole chat completion (each choice), first found first."""
    found: list[AnswerViolation] = []
    choices = answer.get("choices") if isinstance(answer, dict) else None
    for index, choice in enumerate(choices if isinstance(choices, list) else ()):
        if not isinstance(choice, dict) or choice.get("finish_reason") in _CUT:
            continue
        message = choice.get("message")
        if not isinstance(message, dict) or message.get("refusal"):
            continue
        base = f"choices[{index}].message"
        calls: list[Call] = []
        listed = message.get("tool_calls")
        for at, call in enumerate(listed if isinstance(listed, list) else ()):
            function = call.get("function") if isinstance(call, dict) else None
            function = function if isinstance(function, dict) else {}
            where = f"{base}.tool_calls[{at}].function"
            calls.append(
                (
                    function.get("name"),
                    function.get("arguments"),
                    where + ".name",
                    where + ".arguments",
                )
            )
        content = message.get("content")
        text = content if isinstance(content, str) else None
        found += _check(expect, text, f"{base}.content", calls, f"{base}.tool_calls")
    return found


def check_response(expect: Expectation, response: Any) -> list[AnswerViolation]:
    """The violations in a whole Responses object (its output items)."""
    if not isinstance(response, dict) or response.get("status") != "completed":
        return []
    texts: list[tuple[str, str]] = []
    calls: list[Call] = []
    output = response.get("output")
    for index, item in enumerate(output if isinstance(output, list) else ()):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            where = f"output[{index}]"
            calls.append(
                (item.get("name"), item.get("arguments"), where + ".name", where + ".arguments")
            )
        elif item.get("type") == "message":
            parts = item.get("content")
            for at, part in enumerate(parts if isinstance(parts, list) else ()):
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "refusal":
                    return []
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append((part["text"], f"output[{index}].content[{at}].text"))
    text, where = _text_of(texts, "output")
    return _check(expect, text, where, calls, "output")


def check_message(expect: Expectation, message: Any) -> list[AnswerViolation]:
    """The violations in a whole Messages API answer (its content blocks: the text, each
    ``tool_use``'s input), at the paths of the client's message (``content[1].input``).
    An answer cut at max_tokens, or a refusal, is not checked."""
    if not isinstance(message, dict) or message.get("stop_reason") in _MESSAGE_CUT:
        return []
    texts: list[tuple[str, str]] = []
    calls: list[Call] = []
    content = message.get("content")
    for index, block in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(block, dict):
            continue
        where = f"content[{index}]"
        if block.get("type") == "tool_use":
            calls.append((block.get("name"), block.get("input"), where + ".name", where + ".input"))
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append((block["text"], where + ".text"))
    text, path = _text_of(texts, "content")
    return _check(expect, text, path, calls, "content")


def _text_of(texts: list[tuple[str, str]], whole: str) -> tuple[str | None, str]:
    """An answer's text and its path: its one part's, or its parts joined at ``whole``
    (None where it has none)."""
    if len(texts) == 1:
        return texts[0]
    return ("".join(t for t, _ in texts) if texts else None), whole


def _check(
    expect: Expectation, text: str | None, text_path: str, calls: list[Call], calls_path: str
) -> list[AnswerViolation]:
    answers = expect.answers
    found: list[AnswerViolation] = []
    if expect.single and len(calls) > 1:
        found.append(
            _violation(
                answers.parallel_tool_calls,
                f"The engine's answer has {len(calls)} tool calls, and the request asked for "
                "one at most (parallel_tool_calls: false).",
                param=calls[1][2].rsplit(".", 2)[0]
                if not expect.responses
                else calls[1][2].rsplit(".", 1)[0],
                code="answer_violates_parallel_tool_calls",
                check="parallel_tool_calls",
            )
        )
    choice = expect.choice
    if choice is not None and not any(name == choice or choice == "required" for name, *_ in calls):
        asked = (
            "a tool call (tool_choice: 'required')"
            if choice == "required"
            else f"a call of '{choice}' (tool_choice)"
        )
        found.append(
            _violation(
                answers.tool_choice,
                f"The engine's answer has no tool call where the request asked for {asked}.",
                param=calls_path,
                code="answer_violates_tool_choice",
                check="tool_choice",
            )
        )
    if answers.tool_arguments != OFF:
        for name, arguments, name_path, arguments_path in calls:
            found += _check_call(expect, name, arguments, name_path, arguments_path)
    if expect.schema is not None and text is not None and not (calls and not text.strip()):
        violation = _against(
            answers.schema, expect.schema, expect.schema_param, text, text_path, "schema", "content"
        )
        if violation is not None:
            found.append(violation)
    return found


def _check_call(
    expect: Expectation, name: Any, arguments: Any, name_path: str, arguments_path: str
) -> list[AnswerViolation]:
    setting = expect.answers.tool_arguments
    tool = expect.tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return [
            _violation(
                setting,
                f"The engine's answer calls {str(name)[:64]!r}, a tool the request does not "
                "define.",
                param=name_path,
                code="answer_violates_tool_choice",
                check="tool_arguments",
            )
        ]
    parameters, where = tool
    if parameters is None:
        parameters = JSON_OBJECT
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else orjson.dumps(arguments).decode()
    violation = _against(
        setting, parameters, where, arguments, arguments_path, "tool_arguments", "arguments"
    )
    return [] if violation is None else [violation]


def _against(
    setting: str, schema: Any, schema_param: str, text: str, path: str, check: str, what: str
) -> AnswerViolation | None:
    """The violation of ``text`` (a JSON text) against ``schema``, or None."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _violation(
            setting,
            f"The engine's answer broke the request's schema at '{path}': its {what} is not JSON.",
            param=path,
            code="answer_violates_schema",
            check=check,
        )
    if schema is JSON_OBJECT:
        if isinstance(value, dict):
            return None
        return _violation(
            setting,
            f"The engine's answer broke the request's JSON mode at '{path}': keyword 'type' "
            f"(an object): its {what} is not a JSON object.",
            param=path,
            code="answer_violates_schema",
            check=check,
            keyword="type",
        )
    try:
        broken = first_error(validator(schema), value)
    except ValueError:
        return None  # a schema the validator cannot take was refused on the way in
    if broken is None:
        return None
    at, rule, message = broken
    inside = schema_path(path, at)
    keyword = str(rule[-1]) if rule else ""
    return _violation(
        setting,
        f"The engine's answer broke the request's schema at '{inside}': keyword '{keyword}' "
        f"({schema_path(schema_param, rule)}): {message}",
        param=inside,
        code="answer_violates_schema",
        check=check,
        keyword=keyword,
    )
