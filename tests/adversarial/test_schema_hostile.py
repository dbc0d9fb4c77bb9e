"""Hostile schemas never reach the engine: each is a 400 naming what crossed the line, and
the gateway is none the worse for it (the schemas that crashed engines: deep nesting,
huge enums, catastrophic patterns, $ref cycles, remote refs; shared/STRUCTURED-OUTPUTS.md
section 5). Through the app, the engine mocked: it must see none of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gateway.app.factory import create_app
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.schemas import (
    CHAT,
    CHAT_TOOL,
    FORMAT,
    RESPONSES,
    RESPONSES_TOOL,
    STRUCTURED,
    TEXT_FORMAT,
    chat_tool,
    formatted,
    person,
    responses_tool,
    text_formatted,
)

pytestmark = pytest.mark.anyio
STRING: Any = {"type": "string"}
# A real-world email pattern with nested repetition (CVE-style ReDoS).
EMAIL_REDOS = (
    "^([a-zA-Z0-9])(([\\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}"
    "(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$"
)


def deep(levels: int, key: str = "items") -> Any:
    """``levels`` schemas inside one another by ``key`` (items: answer depth too)."""
    schema: Any = STRING
    for _ in range(levels):
        schema = {key: schema} if key != "anyOf" else {"anyOf": [schema]}
    return schema


def chain(length: int) -> Any:
    """``$defs`` d0 -> d1 -> ... each requiring the next, and the last the first."""
    defs = {f"d{i}": person(next={"$ref": f"#/$defs/d{(i + 1) % length}"}) for i in range(length)}
    return {"$defs": defs, **person(head={"$ref": "#/$defs/d0"})}


# (what, schema, code, the start of the path named inside it)
HOSTILE: list[tuple[str, Any, str, str]] = [
    ("200 levels of items", {"type": "array", "items": deep(200)}, "schema_too_deep", "items"),
    (
        "100 levels of anyOf",
        person(x=deep(100, "anyOf")),
        "schema_too_deep",
        "properties.x.anyOf[0]",
    ),
    ("200 levels of not", person(x=deep(200, "not")), "schema_too_deep", "properties.x.not"),
    (
        "an enum of 100,000 values",
        person(x={"enum": list(range(100_000))}),
        "schema_enum_too_large",
        "properties.x.enum",
    ),
    (
        "an enum of 300 long strings",
        person(x={"enum": ["x" * 1000 + str(i) for i in range(300)]}),
        "schema_enum_too_long",
        "properties.x.enum",
    ),
    (
        "20,000 properties",
        person(**{f"p{i}": STRING for i in range(20_000)}),
        "schema_too_many_properties",
        "properties",
    ),
    (
        "12,000 nodes",
        person(**{f"p{i}": {"anyOf": [STRING, STRING]} for i in range(4000)}),
        "schema_too_large",
        "",
    ),
    (
        "a name of 200,000 characters",
        person(**{"n" * 200_000: STRING}),
        "schema_strings_too_long",
        "",
    ),
    (
        "a pattern of 100,000 characters",
        person(x={"type": "string", "pattern": "a" * 100_000}),
        "schema_pattern_too_long",
        "properties.x.pattern",
    ),
    (
        "(a+)+$",
        person(x={"type": "string", "pattern": "^(a+)+$"}),
        "schema_pattern_unsafe",
        "properties.x.pattern",
    ),
    (
        "(a|aa)*",
        person(x={"type": "string", "pattern": "^(a|aa)*$"}),
        "schema_pattern_unsafe",
        "properties.x.pattern",
    ),
    (
        "(.*a){20}",
        person(x={"type": "string", "pattern": "^(.*a){20}$"}),
        "schema_pattern_unsafe",
        "properties.x.pattern",
    ),
    (
        "nested groups of stars",
        person(x={"type": "string", "pattern": "((((a*)*)*)*)*b"}),
        "schema_pattern_unsafe",
        "properties.x.pattern",
    ),
    (
        "an email ReDoS",
        person(
            x={
                "type": "string",
                "pattern": EMAIL_REDOS,
            }
        ),
        "schema_pattern_unsafe",
        "properties.x.pattern",
    ),
    (
        "a pattern that does not compile",
        person(x={"type": "string", "pattern": "(?<!"}),
        "invalid_json_schema",
        "properties.x.pattern",
    ),
    (
        "a remote $ref",
        person(x={"$ref": "http://127.0.0.1:9/evil.json"}),
        "schema_remote_ref",
        "properties.x.$ref",
    ),
    (
        "a file $ref",
        person(x={"$ref": "file:///etc/passwd"}),
        "schema_remote_ref",
        "properties.x.$ref",
    ),
    (
        "a relative $ref",
        person(x={"$ref": "other.json#/a"}),
        "schema_remote_ref",
        "properties.x.$ref",
    ),
    ("a $ref cycle of 50 definitions", chain(50), "schema_ref_cycle", "$defs"),
    (
        "a self-reference of the root, required",
        person(me={"$ref": "#"}),
        "schema_ref_cycle",
        "properties.me.$ref",
    ),
    (
        "a $ref to nowhere",
        person(x={"$ref": "#/$defs/none"}),
        "invalid_json_schema",
        "properties.x.$ref",
    ),
    ("type as a number", person(x={"type": 12}), "invalid_json_schema", "properties.x.type"),
    (
        "properties as a list",
        {"type": "object", "properties": [1, 2]},
        "invalid_json_schema",
        "properties",
    ),
]
PLACES: list[tuple[str, str, Callable[[Any], dict[str, Any]], str]] = [
    ("response_format", CHAT, formatted, FORMAT),
    ("chat tool", CHAT, chat_tool, CHAT_TOOL),
    ("text.format", RESPONSES, text_formatted, TEXT_FORMAT),
    ("Responses tool", RESPONSES, responses_tool, RESPONSES_TOOL),
]


@pytest.mark.parametrize(("place", "route", "body", "prefix"), PLACES, ids=[p[0] for p in PLACES])
@pytest.mark.parametrize(("what", "schema", "code", "where"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_a_hostile_schema_is_a_400_and_never_reaches_the_engine(
    place: str,
    route: str,
    body: Callable[[Any], dict[str, Any]],
    prefix: str,
    what: str,
    schema: Any,
    code: str,
    where: str,
) -> None:
    engine = MockEngine()
    settings = gateway_settings("http://engine.invalid", policy=STRUCTURED)
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        answer = await client.post(route, content=json.dumps(body(schema)),
                                   headers={"content-type": "application/json"})  # fmt: skip
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        expected = code
        if code == "invalid_json_schema" and "tool" in place:
            expected = "invalid_function_parameters"
        assert error["code"] == expected
        assert error["param"].startswith(f"{prefix}.{where}" if where else prefix)
        assert error["type"] == "invalid_request_error"
        # The gateway still serves: the same place with a sound schema goes through.
        fine = await client.post(route, content=json.dumps(body(person(x=STRING))),
                                 headers={"content-type": "application/json"})  # fmt: skip
        assert fine.status_code != 400, fine.text
    assert len(engine.requests) == 1  # the sound one only


@pytest.mark.parametrize(
    ("opening", "closing"),
    [('{"items": ', "}"), ('{"anyOf": [', "]}"), ('{"type": "object", "properties": {"a": ', "}}")],
)
async def test_a_schema_too_deep_to_parse_is_refused_before_the_policy(
    opening: str, closing: str
) -> None:
    schema = opening * 5000 + '{"type": "string"}' + closing * 5000
    text = json.dumps(formatted("SCHEMA")).replace('"SCHEMA"', schema)
    engine = MockEngine()
    settings = gateway_settings("http://engine.invalid", policy=STRUCTURED)
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        answer = await client.post(CHAT, content=text, headers={"content-type": "application/json"})
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_json"
    assert engine.requests == []
