"""What a chat request asks of structured outputs and tools, read as an engine reads it.

``read_request`` takes the fields ft serve ignores (``response_format``, ``tools``,
``tool_choice``, ``parallel_tool_calls``) when the options turn them on, checks them the
way OpenAI's API does (a 400 naming the exact field), and compiles each schema
(schema.py): what the converter refuses is a 400 at the schema's field, what it
crashes on a 500.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refengine.errors import EngineError, EngineFailure
from refengine.structured.options import StructuredOptions
from refengine.structured.schema import Compiled, SchemaRefused, compile_schema
from refengine.template import message_text

NONE, AUTO, REQUIRED, FUNCTION = "none", "auto", "required", "function"
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# JSON mode's answer when no schema is given: an object with something in it.
JSON_OBJECT: dict[str, Any] = {"type": "object", "minProperties": 1}


@dataclass(frozen=True)
class Tool:
    """A function the model may call, with its parameters compiled."""

    name: str
    parameters: Compiled


@dataclass(frozen=True)
class Asked:
    """The structured part of one chat request."""

    format: str | None  # "json_object" | "json_schema" | None (text)
    schema: Compiled | None  # the content's schema (json_object: JSON_OBJECT)
    tools: tuple[Tool, ...]
    choice: str  # none | auto | required | function
    named: str | None  # the function a named choice names
    parallel: bool
    says_json: bool  # a message mentions JSON (OpenAI asks it of JSON mode)
    last_role: str
    mentioned: tuple[str, ...]  # the tools the last user message names, in its order


def _invalid(param: str, message: str) -> EngineError:
    return EngineError(f"Invalid '{param}': {message}", param=param, code="invalid_value")


def _compiled(schema: Any, param: str, options: StructuredOptions) -> Compiled:
    if not isinstance(schema, dict):
        raise _invalid(param, "a schema must be a JSON object")
    try:
        return compile_schema(schema, options.schema)
    except SchemaRefused as exc:
        if exc.status >= 500:
            raise EngineFailure(exc.message) from exc
        raise EngineError(exc.message, param=param, code="invalid_json_schema") from exc


def _response_format(value: Any, options: StructuredOptions) -> tuple[str | None, Compiled | None]:
    if value is None or not options.response_format:
        return None, None
    if not isinstance(value, dict):
        raise _invalid("response_format", "expected an object")
    kind = value.get("type")
    if kind == "text":
        return None, None
    if kind == "json_object":
        return kind, _compiled(JSON_OBJECT, "response_format", options)
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise _invalid("response_format.json_schema", "expected an object")
        schema = spec.get("schema", {})
        return kind, _compiled(schema, "response_format.json_schema.schema", options)
    raise _invalid("response_format.type", f"{kind!r} is not text, json_object or json_schema")


def _tools(value: Any, options: StructuredOptions) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _invalid("tools", "expected an array")
    tools: list[Tool] = []
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise _invalid(f"{at}.type", "only function tools are supported")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _invalid(f"{at}.function", "expected an object")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _invalid(f"{at}.function.name", "expected 1-64 letters, digits, _ or -")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        tools.append(Tool(name, _compiled(parameters, f"{at}.function.parameters", options)))
    return tuple(tools)


def _choice(value: Any, tools: Sequence[Tool]) -> tuple[str, str | None]:
    if value is None:
        return (AUTO if tools else NONE), None
    if value in (NONE, AUTO, REQUIRED):
        if value == REQUIRED and not tools:
            raise _invalid("tool_choice", "'required' needs tools")
        return str(value), None
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(name, str):
        raise _invalid("tool_choice", "expected none, auto, required or a named function")
    if name not in {t.name for t in tools}:
        raise _invalid("tool_choice.function.name", f"no tool is named {name!r}")
    return FUNCTION, name


def _mentioned(text: str, tools: Sequence[Tool]) -> tuple[str, ...]:
    """The tools ``text`` names as words, in the order it names them."""
    found = []
    for tool in tools:
        hit = re.search(rf"(?<![\w-]){re.escape(tool.name)}(?![\w-])", text)
        if hit is not None:
            found.append((hit.start(), tool.name))
    return tuple(name for _, name in sorted(found))


def read_request(
    fields: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], options: StructuredOptions
) -> Asked | None:
    """The structured part of a chat request, or None when it asks for none (or the
    options leave it to be ignored)."""
    if not options.enabled:
        return None
    kind, schema = _response_format(fields.get("response_format"), options)
    tools = _tools(fields.get("tools"), options) if options.tools else ()
    choice, named = _choice(fields.get("tool_choice"), tools) if options.tools else (NONE, None)
    if kind is None and not tools:
        return None
    parallel = fields.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise _invalid("parallel_tool_calls", "expected a boolean")
    texts = [message_text(m.get("content")) for m in messages]
    users = [t for m, t in zip(messages, texts, strict=True) if m.get("role") == "user"]
    return Asked(
        format=kind,
        schema=schema,
        tools=tools,
        choice=choice,
        named=named,
        parallel=parallel,
        says_json=any("json" in t.lower() for t in texts),
        last_role=str(messages[-1].get("role")) if messages else "",
        mentioned=_mentioned(users[-1], tools) if users else (),
    )
