"""What a request asked its answer to be, as the answer checks read it.

Built once per request, and only for a request that asks for something an answer
check looks at (a response format, tools, a tool choice, one call only) on a route
whose policy turns a check on: the policy's walk goes the full way for such
requests, so the many without one pay nothing (engine.py). answers.py checks an
answer against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.routes import MESSAGES, RESPONSES
from gateway.schemas.rules import ANSWER_CHECKS, AnswerChecks

OFF, REPORT, ENFORCE = "off", "report", "enforce"
# A json_object response format: any JSON object, no schema.
JSON_OBJECT: Any = {"type": "object"}
# The request fields an expectation reads (their rules never take the fast walk).
# (output_config and output_format: the Messages API's response format.)
ASKING = (
    "response_format",
    "text",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "output_config",
    "output_format",
)


@dataclass(frozen=True, slots=True)
class Answers:
    """The answer checks in force for one route, model and profile (off, report, enforce)."""

    schema: str = OFF
    tool_arguments: str = OFF
    tool_choice: str = OFF
    parallel_tool_calls: str = OFF


def answers_of(layers: list[AnswerChecks]) -> Answers | None:
    """The checks ``layers`` set, each over the one before (None: every check off)."""
    found = dict.fromkeys(ANSWER_CHECKS, OFF)
    for layer in layers:
        for name, value in zip(
            ANSWER_CHECKS,
            (layer.schema_, layer.tool_arguments, layer.tool_choice, layer.parallel_tool_calls),
            strict=True,
        ):
            if value is not None:
                found[name] = value
    if all(v == OFF for v in found.values()):
        return None
    return Answers(**found)


@dataclass(frozen=True, slots=True)
class Expectation:
    """One request's asks: the format's schema (JSON_OBJECT for json_object) and where it
    stands, each tool's parameters and where they stand, the tool choice ("required", a
    function's name, or None) and whether one call at most was asked for."""

    answers: Answers
    schema: Any
    schema_param: str
    tools: dict[str, tuple[Any, str]]
    choice: str | None
    single: bool
    responses: bool  # the answer is a Responses object (else a chat completion, a message)


def expectation(answers: Answers, route: str, body: dict[str, Any]) -> Expectation | None:
    """What ``body`` asks of its answer, where a check in ``answers`` looks at it."""
    if route == MESSAGES:
        return _messages_expectation(answers, body)
    responses = route == RESPONSES
    schema, where = _format(body, responses) if answers.schema != OFF else (None, "")
    tools: dict[str, tuple[Any, str]] = {}
    listed = body.get("tools")
    if isinstance(listed, list) and (answers.tool_arguments != OFF or answers.tool_choice != OFF):
        for index, tool in enumerate(listed):
            if not isinstance(tool, dict) or tool.get("type") != "function":
                continue
            function = tool if responses else tool.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            path = (
                f"tools[{index}].parameters" if responses else f"tools[{index}].function.parameters"
            )
            tools[function["name"]] = (function.get("parameters"), path)
    choice = _choice(body.get("tool_choice"), responses) if answers.tool_choice != OFF else None
    single = answers.parallel_tool_calls != OFF and body.get("parallel_tool_calls") is False
    if schema is None and not tools and choice is None and not single:
        return None
    return Expectation(answers, schema, where, tools, choice, single, responses)


def _format(body: dict[str, Any], responses: bool) -> tuple[Any, str]:
    if responses:
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
        where = "text.format.schema"
        holder = fmt
    else:
        fmt = body.get("response_format")
        where = "response_format.json_schema.schema"
        holder = fmt.get("json_schema") if isinstance(fmt, dict) else None
    if not isinstance(fmt, dict):
        return None, ""
    if fmt.get("type") == "json_object":
        return JSON_OBJECT, "response_format" if not responses else "text.format"
    if fmt.get("type") != "json_schema" or not isinstance(holder, dict):
        return None, ""
    schema = holder.get("schema")
    return (schema if isinstance(schema, (dict, bool)) else JSON_OBJECT), where


def _choice(choice: Any, responses: bool) -> str | None:
    if choice == "required":
        return "required"
    if isinstance(choice, dict) and choice.get("type") == "function":
        named = choice if responses else choice.get("function")
        name = named.get("name") if isinstance(named, dict) else None
        return name if isinstance(name, str) else None
    return None


def _messages_expectation(answers: Answers, body: dict[str, Any]) -> Expectation | None:
    """What a Messages API request asks of its answer (answers.py's check_message reads
    the message): ``output_config.format`` (or the beta's ``output_format``), each custom
    tool's ``input_schema``, a forced ``tool_choice`` (any: a call; tool: that one) and
    ``disable_parallel_tool_use``."""
    schema, where = None, ""
    if answers.schema != OFF:
        config = body.get("output_config")
        fmt, at = (
            (config.get("format"), "output_config.format")
            if isinstance(config, dict) and "format" in config
            else (body.get("output_format"), "output_format")
        )
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = fmt.get("schema")
            schema = schema if isinstance(schema, (dict, bool)) else JSON_OBJECT
            where = at + ".schema"
    tools: dict[str, tuple[Any, str]] = {}
    listed = body.get("tools")
    if isinstance(listed, list) and (answers.tool_arguments != OFF or answers.tool_choice != OFF):
        for index, tool in enumerate(listed):
            if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
                continue
            if isinstance(tool.get("name"), str):
                tools[tool["name"]] = (tool.get("input_schema"), f"tools[{index}].input_schema")
    choice_value = body.get("tool_choice")
    choice_value = choice_value if isinstance(choice_value, dict) else {}
    choice = None
    if answers.tool_choice != OFF:
        if choice_value.get("type") == "any":
            choice = "required"
        elif choice_value.get("type") == "tool" and isinstance(choice_value.get("name"), str):
            choice = choice_value["name"]
    single = (
        answers.parallel_tool_calls != OFF and choice_value.get("disable_parallel_tool_use") is True
    )
    if schema is None and not tools and choice is None and not single:
        return None
    return Expectation(answers, schema, where, tools, choice, single, False)
