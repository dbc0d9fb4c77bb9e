"""The limits, invalid schemas, references and OpenAI's strict subset: one row each, the
schema and the 400 it gets (code, and param: the exact path of what crossed the line)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from tests.support.schemas import (
    CHAT,
    CHAT_TOOL,
    FORMAT,
    RESPONSES,
    STRUCTURED,
    TEXT_FORMAT,
    chat_tool,
    formatted,
    person,
    text_formatted,
)

POLICY = Policy(load_policy_file(STRUCTURED)[0])
STRING: Any = {"type": "string"}


def nested(levels: int, leaf: Any = STRING) -> Any:
    """An object schema ``levels`` objects deep (each with one property ``a``)."""
    schema = leaf
    for _ in range(levels):
        schema = person(a=schema)
    return schema


def deep_path(levels: int) -> str:
    return ".".join(["properties.a"] * levels)


def within_nesting(count: int) -> Any:
    """anyOf inside anyOf ``count`` times: deep nesting that adds no answer depth."""
    schema: Any = STRING
    for _ in range(count):
        schema = {"anyOf": [schema]}
    return person(x=schema)


# (limit, schema, code, the path inside the schema named by param)
LIMITS: list[tuple[str, Any, str, str]] = [
    ("max_depth", nested(11), "schema_too_deep", deep_path(11)),
    ("max_nesting", within_nesting(64), "schema_too_deep", "properties.x" + ".anyOf[0]" * 64),
    (
        "max_nodes",
        person(**{f"p{i}": {"anyOf": [STRING, {"type": "null"}]} for i in range(3400)}),
        "schema_too_large",
        "",
    ),
    (
        "max_properties",
        {"type": "object", "properties": {"a": person(**{f"p{i}": STRING for i in range(5001)})}},
        "schema_too_many_properties",
        "properties.a.properties",
    ),
    (
        "max_enum_values",
        person(a={"enum": list(range(600))}, b={"enum": list(range(401))}),
        "schema_enum_too_large",
        "properties.b.enum",
    ),
    (
        "max_large_enum_chars",
        person(a={"type": "string", "enum": [f"{i:060d}" for i in range(251)]}),
        "schema_enum_too_long",
        "properties.a.enum",
    ),
    (
        "max_total_chars",
        person(**{f"{i:0200d}": STRING for i in range(601)}),
        "schema_strings_too_long",
        "",
    ),
    (
        "max_pattern_length",
        person(a={"type": "string", "pattern": "^" + "a" * 1000 + "$"}),
        "schema_pattern_too_long",
        "properties.a.pattern",
    ),
    (
        "pattern shape",
        person(a={"type": "string", "pattern": "^(a+)+$"}),
        "schema_pattern_unsafe",
        "properties.a.pattern",
    ),
    (
        "pattern shape, patternProperties",
        {"type": "object", "patternProperties": {"^(\\w+\\s?)*$": STRING}},
        "schema_pattern_unsafe",
        "patternProperties.^(\\w+\\s?)*$",
    ),
    (
        "remote $ref",
        person(a={"$ref": "https://example.com/a.json"}),
        "schema_remote_ref",
        "properties.a.$ref",
    ),
    (
        "$ref cycle, no base case",
        {
            "$defs": {
                "n": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/n"}},
                    "required": ["next"],
                }
            },
            **person(head={"$ref": "#/$defs/n"}),
        },
        "schema_ref_cycle",
        "$defs.n.properties.next.$ref",
    ),
    (
        "$ref cycle through an array that must be full",
        {
            "$defs": {"t": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/t"}}},
            **person(t={"$ref": "#/$defs/t"}),
        },
        "schema_ref_cycle",
        "$defs.t.items.$ref",
    ),
    (
        "$ref cycle of the root, every anyOf branch recursive",
        {"anyOf": [person(a={"$ref": "#"}), person(b={"$ref": "#"})]},
        "schema_ref_cycle",
        "anyOf[0].properties.a.$ref",
    ),
]
# (what, schema, the path named) for a schema that is not JSON Schema: OpenAI's code.
INVALID: list[tuple[str, Any, str]] = [
    ("type not a type name", person(a={"type": "strin"}), "properties.a.type"),
    ("type a number", person(a={"type": 5}), "properties.a.type"),
    ("required not an array", {"type": "object", "required": "a"}, "required"),
    ("minLength negative", person(a={"type": "string", "minLength": -1}), "properties.a.minLength"),
    ("properties not an object", {"type": "object", "properties": []}, "properties"),
    (
        "a pattern that is not a regex",
        person(a={"type": "string", "pattern": "(a"}),
        "properties.a.pattern",
    ),
    ("a $ref to nothing", person(a={"$ref": "#/$defs/missing"}), "properties.a.$ref"),
]
# A recursive schema with a way out passes.
FINITE: list[tuple[str, Any]] = [
    (
        "optional recursion",
        {
            "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
            **person(head={"$ref": "#/$defs/n"}),
        },
    ),
    (
        "anyOf with a null branch",
        {
            "$defs": {"n": person(next={"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]})},
            **person(head={"$ref": "#/$defs/n"}),
        },
    ),
    (
        "an array that may be empty",
        {
            "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
            **person(t={"$ref": "#/$defs/t"}),
        },
    ),
    ("the root, optionally", {"type": "object", "properties": {"child": {"$ref": "#"}}}),
    ("ten levels", nested(10)),
]
# With strict: true: (what, schema, path, words of OpenAI's message).
STRICT: list[tuple[str, Any, str, str]] = [
    ("root not an object", {"type": "array"}, "", "'type: \"object\"'"),
    ("root anyOf", {"type": "object", "anyOf": [STRING]}, "", "not 'anyOf'"),
    (
        "open object",
        person(a=STRING),
        "additionalProperties",
        "In context=(), 'additionalProperties'",
    ),
    (
        "a property not required",
        {
            "type": "object",
            "properties": {"a": STRING, "b": STRING},
            "required": ["a"],
            "additionalProperties": False,
        },
        "required",
        "Missing 'b'",
    ),
    (
        "nested open object",
        {
            **person(a={"type": "object", "properties": {}, "required": []}),
            "additionalProperties": False,
        },
        "properties.a.additionalProperties",
        "In context=('properties', 'a')",
    ),
    (
        "allOf",
        {**person(a={"allOf": [STRING]}), "additionalProperties": False},
        "properties.a.allOf",
        "'allOf' is not permitted",
    ),
]


@pytest.mark.parametrize(("limit", "schema", "code", "where"), LIMITS, ids=[r[0] for r in LIMITS])
def test_each_limit_is_its_own_400(limit: str, schema: Any, code: str, where: str) -> None:
    error = apply_policy(POLICY, CHAT, formatted(schema)).error
    assert error is not None
    assert (error.code, error.param) == (code, f"{FORMAT}.{where}" if where else FORMAT)
    assert error.status == 400
    if code not in ("schema_pattern_unsafe", "schema_remote_ref", "schema_ref_cycle"):
        assert f"json_schema.limits.{limit}" in error.message


@pytest.mark.parametrize(("what", "schema", "where"), INVALID, ids=[r[0] for r in INVALID])
def test_a_schema_that_is_not_json_schema_is_a_400_in_openais_words(
    what: str, schema: Any, where: str
) -> None:
    error = apply_policy(POLICY, CHAT, formatted(schema)).error
    assert error is not None
    assert (error.code, error.param) == ("invalid_json_schema", f"{FORMAT}.{where}")
    assert error.message.startswith("Invalid schema for response_format 'person': ")
    tool = apply_policy(POLICY, CHAT, chat_tool(schema)).error
    assert tool is not None
    assert (tool.code, tool.param) == ("invalid_function_parameters", f"{CHAT_TOOL}.{where}")
    assert tool.message.startswith("Invalid schema for function 'get_weather': ")


@pytest.mark.parametrize(("what", "schema"), FINITE, ids=[r[0] for r in FINITE])
def test_a_recursive_schema_with_a_base_case_passes(what: str, schema: Any) -> None:
    decision = apply_policy(POLICY, CHAT, formatted(schema))
    assert decision.error is None, decision.error and decision.error.message


@pytest.mark.parametrize(("what", "schema", "where", "words"), STRICT, ids=[r[0] for r in STRICT])
def test_strict_asks_for_openais_subset(what: str, schema: Any, where: str, words: str) -> None:
    assert apply_policy(POLICY, RESPONSES, text_formatted(schema)).error is None or what == "allOf"
    error = apply_policy(POLICY, RESPONSES, text_formatted(schema, strict=True)).error
    assert error is not None
    assert (error.code, error.param) == (
        "invalid_json_schema",
        f"{TEXT_FORMAT}.{where}" if where else TEXT_FORMAT,
    )
    assert words in error.message


def test_a_strict_schema_in_the_subset_passes() -> None:
    schema = {
        **person(a=STRING, b={"anyOf": [STRING, {"type": "null"}]}),
        "additionalProperties": False,
    }
    assert apply_policy(POLICY, CHAT, formatted(schema, strict=True)).error is None


def test_strict_none_leaves_the_subset_unchecked() -> None:
    text = """
version: 1
routes:
  /v1/chat/completions:
    fields:
      model: {action: pass, type: string}
      messages: {action: pass, type: array}
      tools:
        action: pass
        type: array
        select:
          key: type
          rules:
            function:
              fields:
                function:
                  action: pass
                  type: object
                  fields:
                    name: {action: pass, type: string}
                    strict: {action: pass, type: boolean}
                    parameters:
                      action: pass
                      type: object
                      json_schema: {unknown_keywords: pass, strict: none}
"""
    policy = Policy(parse_policy_text(text))
    body = chat_tool(person(a=STRING))
    body["tools"][0]["function"]["strict"] = True
    assert apply_policy(policy, CHAT, body).error is None
    limited = text.replace("strict: none", "strict: none, limits: {max_depth: 1}")
    error = apply_policy(Policy(parse_policy_text(limited)), CHAT, chat_tool(nested(2))).error
    assert error is not None and (error.code, error.param) == (
        "schema_too_deep",
        f"{CHAT_TOOL}.properties.a.properties.a",
    )
    off = text.replace("strict: none", "strict: none, limits: {max_depth: null}")
    assert apply_policy(Policy(parse_policy_text(off)), CHAT, chat_tool(nested(30))).error is None
