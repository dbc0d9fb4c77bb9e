"""Requests that carry a JSON Schema, in each place one stands, and the policy that
checks them (tests/fixtures/policies/structured.yaml: an engine whose grammar drops
some keywords, answer checks enforced)."""

from __future__ import annotations

from typing import Any

from tests.support.paths import FIXTURES

STRUCTURED = FIXTURES / "policies" / "structured.yaml"
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MODEL = "Qwen3.8-Flash-Next"
MESSAGES: Any = [{"role": "user", "content": "Answer in JSON."}]
# Where each place puts the schema (the prefix of every param naming a part of it).
FORMAT = "response_format.json_schema.schema"
TEXT_FORMAT = "text.format.schema"
CHAT_TOOL = "tools[0].function.parameters"
RESPONSES_TOOL = "tools[0].parameters"


def formatted(schema: Any, *, strict: bool | None = None, **fields: Any) -> dict[str, Any]:
    """A chat request whose response_format is ``schema`` (json_schema)."""
    holder: dict[str, Any] = {"name": "person", "schema": schema}
    if strict is not None:
        holder["strict"] = strict
    format_ = {"type": "json_schema", "json_schema": holder}
    return {"model": MODEL, "messages": MESSAGES, "response_format": format_, **fields}


def text_formatted(schema: Any, *, strict: bool | None = None, **fields: Any) -> dict[str, Any]:
    """A Responses request whose text.format is ``schema``."""
    format_: dict[str, Any] = {"type": "json_schema", "name": "person", "schema": schema}
    if strict is not None:
        format_["strict"] = strict
    return {"model": MODEL, "input": "Answer in JSON.", "text": {"format": format_}, **fields}


def chat_tool(parameters: Any, *, name: str = "get_weather", **fields: Any) -> dict[str, Any]:
    """A chat request with one function tool whose parameters are ``parameters``."""
    function = {"name": name, "parameters": parameters}
    tools = [{"type": "function", "function": function}]
    return {"model": MODEL, "messages": MESSAGES, "tools": tools, **fields}


def responses_tool(parameters: Any, *, name: str = "get_weather", **fields: Any) -> dict[str, Any]:
    """A Responses request with one function tool whose parameters are ``parameters``."""
    tools = [{"type": "function", "name": name, "parameters": parameters}]
    return {"model": MODEL, "input": "What is the weather?", "tools": tools, **fields}


def person(**properties: Any) -> dict[str, Any]:
    """An object schema with ``properties`` (each a schema), all required."""
    return {"type": "object", "properties": properties, "required": list(properties)}
