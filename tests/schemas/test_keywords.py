"""Keyword rules: a schema's keyword refused at its exact path where the engine drops it,
passed where it honours it, in every place a schema stands (a table, one row a rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file, parse_policy_text
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

POLICY = Policy(load_policy_file(STRUCTURED)[0])
STRING: Any = {"type": "string"}
# (what, schema, the path inside it of the keyword refused (None: passes), words of the
# message that say the context)
KEYWORDS: list[tuple[str, Any, str | None, str]] = [
    ("honoured keywords", person(name=STRING, tags={"type": "array", "items": STRING}), None, ""),
    (
        "maxLength dropped",
        person(name={"type": "string", "maxLength": 5}),
        "properties.name.maxLength",
        "'maxLength'.",
    ),
    ("minLength alone honoured", person(name={"type": "string", "minLength": 1}), None, ""),
    (
        "minLength beside pattern dropped",
        person(name={"type": "string", "pattern": "^a+$", "minLength": 2}),
        "properties.name.minLength",
        "'minLength' beside 'pattern'",
    ),
    ("minimum on integer honoured", person(age={"type": "integer", "minimum": 0}), None, ""),
    (
        "minimum on number dropped",
        person(x={"type": "number", "minimum": 0}),
        "properties.x.minimum",
        "on type 'number'",
    ),
    (
        "minimum on number or null dropped",
        person(x={"type": ["number", "null"], "minimum": 0}),
        "properties.x.minimum",
        "on type 'number'",
    ),
    ("minimum without a type: the keyword's own", person(x={"minimum": 0}), None, ""),
    (
        "maximum on number dropped",
        person(x={"type": "number", "maximum": 1}),
        "properties.x.maximum",
        "on type 'number'",
    ),
    ("format date honoured", person(day={"type": "string", "format": "date"}), None, ""),
    (
        "format email dropped",
        person(mail={"type": "string", "format": "email"}),
        "properties.mail.format",
        "value 'email'",
    ),
    ("required with properties honoured", person(name=STRING), None, ""),
    (
        "required without properties dropped",
        {"type": "object", "required": ["a"]},
        "required",
        "without 'properties'",
    ),
    (
        "uniqueItems dropped",
        person(tags={"type": "array", "uniqueItems": True}),
        "properties.tags.uniqueItems",
        "",
    ),
    (
        "a keyword the policy does not name",
        person(x={"not": STRING}),
        "properties.x.not",
        "does not name",
    ),
    (
        "inside $defs",
        {
            "$defs": {"p": {"type": "string", "maxLength": 3}},
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/p"}},
        },
        "$defs.p.maxLength",
        "",
    ),
    (
        "inside anyOf",
        person(x={"anyOf": [STRING, {"type": "string", "maxLength": 2}]}),
        "properties.x.anyOf[1].maxLength",
        "",
    ),
    (
        "inside array items",
        person(xs={"type": "array", "items": {"type": "string", "maxLength": 2}}),
        "properties.xs.items.maxLength",
        "",
    ),
    (
        "inside prefixItems",
        person(
            xs={"type": "array", "prefixItems": [STRING, {"type": "string", "format": "email"}]}
        ),
        "properties.xs.prefixItems[1].format",
        "",
    ),
    (
        "annotations pass",
        {
            **person(
                name={
                    **STRING,
                    "title": "Name",
                    "description": "d",
                    "default": "x",
                    "examples": ["a"],
                }
            ),
            "title": "P",
            "$schema": "https://json-schema.org/draft/2020-12/schema",
        },
        None,
        "",
    ),
    (
        "words outside JSON Schema pass",
        {**person(name=STRING), "discriminator": {"propertyName": "name"}, "x-order": 1},
        None,
        "",
    ),
]
PLACES: list[tuple[str, str, Callable[[Any], dict[str, Any]], str]] = [
    ("chat response_format", CHAT, formatted, FORMAT),
    ("chat tool parameters", CHAT, chat_tool, CHAT_TOOL),
    ("Responses text.format", RESPONSES, text_formatted, TEXT_FORMAT),
    ("Responses tool parameters", RESPONSES, responses_tool, RESPONSES_TOOL),
]


@pytest.mark.parametrize(("place", "route", "body", "prefix"), PLACES, ids=[p[0] for p in PLACES])
@pytest.mark.parametrize(
    ("what", "schema", "where", "words"), KEYWORDS, ids=[k[0] for k in KEYWORDS]
)
def test_a_keyword_the_engine_drops_is_refused_at_its_path(
    place: str,
    route: str,
    body: Callable[[Any], dict[str, Any]],
    prefix: str,
    what: str,
    schema: Any,
    where: str | None,
    words: str,
) -> None:
    decision = apply_policy(POLICY, route, body(schema))
    if where is None:
        assert decision.error is None, decision.error and decision.error.message
        assert decision.reported == ()
        return
    error = decision.error
    assert error is not None
    assert (error.param, error.code) == (f"{prefix}.{where}", "unsupported_schema_keyword")
    assert error.status == 400
    assert error.message.startswith(f"Unsupported value: '{prefix}.{where}': ")
    assert words in error.message


def test_the_reason_is_in_the_message() -> None:
    error = apply_policy(
        POLICY, CHAT, formatted(person(n={"type": "string", "maxLength": 1}))
    ).error
    assert error is not None and error.message.endswith("The engine ignores maxLength.")


def test_a_report_only_keyword_is_reported_and_the_schema_forwarded() -> None:
    body = formatted(person(n={"type": "integer", "multipleOf": 2}))
    decision = apply_policy(POLICY, CHAT, body)
    assert decision.error is None and decision.body is body
    assert [(o.field, o.detail) for o in decision.reported] == [
        (f"{FORMAT}.properties.n.multipleOf", "unsupported_schema_keyword")
    ]


def test_the_first_refusal_is_the_clients_and_every_report_is_kept() -> None:
    schema = person(a={"type": "integer", "multipleOf": 2}, b={"type": "string", "maxLength": 1})
    decision = apply_policy(POLICY, CHAT, formatted(schema))
    assert decision.error is not None and decision.error.param == f"{FORMAT}.properties.b.maxLength"
    assert [o.field for o in decision.reported] == [f"{FORMAT}.properties.a.multipleOf"]


def test_a_profile_makes_the_schema_rule_report_only() -> None:
    body = formatted(person(n={"type": "string", "maxLength": 1}))
    decision = apply_policy(POLICY, CHAT, body, profile="canary")
    assert decision.error is None
    assert [o.detail for o in decision.reported] == ["unsupported_schema_keyword"]


POLICY_TEXT = """
version: 1
routes:
  /v1/chat/completions:
    fields:
      model: {action: pass, type: string}
      messages: {action: pass, type: array}
      response_format:
        action: pass
        type: object
        fields:
          type: {action: pass, type: string}
          json_schema:
            action: pass
            type: object
            fields:
              name: {action: pass, type: string}
              schema: {action: pass, type: object, json_schema: %s}
"""


PATTERN_BESIDE = (
    "{unknown_keywords: pass, keywords: {pattern: {action: reject, beside: {maxLength: {}}}}}"
)


@pytest.mark.parametrize(
    ("rules", "schema", "param"),
    [
        # unknown_keywords: pass lets a keyword the policy does not name through.
        ("{unknown_keywords: pass}", person(x={"type": "string", "maxLength": 1}), None),
        ("{}", person(x={"type": "string"}), "type"),  # reject by default: nothing named
        # A sibling rule that passes overrides a keyword refused on its own.
        (
            PATTERN_BESIDE,
            person(x={"type": "string", "pattern": "^a$", "maxLength": 3}),
            None,
        ),
        (
            PATTERN_BESIDE,
            person(x={"type": "string", "pattern": "^a$"}),
            "properties.x.pattern",
        ),
        # A type that `types` does not name falls back to the keyword's own action.
        (
            "{unknown_keywords: pass, keywords: {minimum: {action: reject, types: {integer: {}}}}}",
            person(x={"type": ["integer", "number"], "minimum": 1}),
            "properties.x.minimum",
        ),
        (
            "{unknown_keywords: pass, keywords: {minimum: {action: reject, types: {integer: {}}}}}",
            person(x={"type": "integer", "minimum": 1}),
            None,
        ),
        # values without unknown: another value is refused.
        (
            "{unknown_keywords: pass, keywords: {format: {values: {uuid: {}}}}}",
            person(x={"type": "string", "format": "ipv4"}),
            "properties.x.format",
        ),
    ],
)
def test_context_rules_decide_in_their_order(rules: str, schema: Any, param: str | None) -> None:
    policy = Policy(parse_policy_text(POLICY_TEXT % rules))
    error = apply_policy(policy, CHAT, formatted(schema)).error
    if param is None:
        assert error is None, error and error.message
    else:
        assert error is not None and error.param == f"{FORMAT}.{param}"
