"""The reference engine's JSON from a schema: every keyword it claims is honoured over
many seeds (checked with jsonschema, formats asserted), a dropped keyword breaks the
answers at a measurable rate, a seed replays, and what a converter refuses is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from refengine.model import default_model
from refengine.server import answer_words
from refengine.structured.generate import HARD_DEPTH, generate
from refengine.structured.keywords import CHECKED, CONSTRUCTED, NAMEABLE, parse_names
from refengine.structured.schema import MAX_NESTING, SchemaRefused, SchemaRules, compile_schema
from sampler.draws import Draws
from tests.support.validating import errors

SEEDS = range(40)
WORDS = answer_words(default_model().tokenizer)
DRAFT7 = "http://json-schema.org/draft-07/schema#"
_INT = {"type": "integer"}
_DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
_AB = {"type": "object", "properties": {"a": _INT, "b": _INT}, "additionalProperties": False}
_IF = {
    "type": "integer",
    "minimum": 0,
    "maximum": 9,
    "if": {"minimum": 5},
    "then": {"multipleOf": 5},
    "else": {"const": 0},
}

# keyword -> a schema that uses it, built so that an answer drawn without it breaks it.
BREAKS_WITHOUT: dict[str, Any] = {
    "type": {
        "type": "object",
        "properties": {"v": _INT},
        "required": ["v"],
        "additionalProperties": False,
    },
    "enum": {"type": "string", "enum": ["red", "green"]},
    "const": {"const": "fixed"},
    "properties": {"type": "object", "properties": {"v": _INT}, "required": ["v"]},
    "required": _AB | {"required": ["a", "b"]},
    "additionalProperties": {"type": "object", "additionalProperties": False},
    "items": {"type": "array", "items": _INT, "minItems": 3},
    "prefixItems": {
        "type": "array",
        "prefixItems": [_INT, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    },
    "additionalItems": {
        "$schema": DRAFT7,
        "type": "array",
        "items": [_INT],
        "additionalItems": {"type": "string"},
        "minItems": 3,
    },
    "minItems": {"type": "array", "items": _INT, "minItems": 5},
    "maxItems": {"type": "array", "items": _INT, "minItems": 1, "maxItems": 1},
    "uniqueItems": {
        "type": "array",
        "items": {"enum": [1, 2, 3]},
        "minItems": 3,
        "maxItems": 3,
        "uniqueItems": True,
    },
    "anyOf": {"anyOf": [_INT, {"type": "boolean"}]},
    "oneOf": {"oneOf": [_INT, {"type": "boolean"}]},
    "allOf": {"allOf": [_INT, {"minimum": 10, "maximum": 12}]},
    "$ref": {"$defs": {"n": _INT}, "$ref": "#/$defs/n"},
    "pattern": {"type": "string", "pattern": "^[0-9]{4}$"},
    "format": {"type": "string", "format": "uuid"},
    "minLength": {"type": "string", "minLength": 60},
    "maxLength": {"type": "string", "maxLength": 3},
    "minimum": {"type": "integer", "minimum": 5000},
    "maximum": {"type": "integer", "maximum": -5000},
    "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 5000},
    "exclusiveMaximum": {"type": "number", "exclusiveMaximum": -5000},
    "multipleOf": {"type": "integer", "multipleOf": 7},
    "minProperties": {"type": "object", "minProperties": 5},
    "maxProperties": {
        "type": "object",
        "properties": {"a": _INT, "b": _INT, "c": _INT},
        "maxProperties": 1,
    },
    "not": {"type": "integer", "minimum": 0, "maximum": 3, "not": {"enum": [1, 2, 3]}},
    "if": _IF,
    "then": _IF,
    "else": _IF,
    "dependentRequired": _AB | {"dependentRequired": {"a": ["b"]}},
    "dependentSchemas": _AB | {"dependentSchemas": {"a": {"required": ["b"]}}},
    "contains": {
        "type": "array",
        "items": _DIGIT,
        "minItems": 2,
        "maxItems": 3,
        "contains": {"const": 7},
    },
    "minContains": {
        "type": "array",
        "items": _DIGIT,
        "minItems": 3,
        "maxItems": 3,
        "contains": {"const": 7},
        "minContains": 2,
    },
    "maxContains": {
        "type": "array",
        "items": {"enum": [7, 8]},
        "minItems": 3,
        "maxItems": 3,
        "contains": {"const": 7},
        "maxContains": 1,
    },
}

_FORMATS = ("date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid")
_TREE: Any = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "children"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}
_LINKED: Any = {
    "type": "object",
    "properties": {"v": _INT, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["v", "next"],
    "additionalProperties": False,
}
# More schemas the answers must satisfy: OpenAI's strict shapes, combinations, formats.
HONOURED: dict[str, Any] = {
    **{f"drop case {k}": v for k, v in BREAKS_WITHOUT.items()},
    **{f"format {f}": {"type": "string", "format": f} for f in _FORMATS},
    "format with lengths": {"type": "string", "format": "email", "maxLength": 24},
    "pattern with lengths": {
        "type": "string",
        "pattern": "^[a-z]+$",
        "minLength": 3,
        "maxLength": 5,
    },
    "type list (optional in strict mode)": {"type": ["string", "null"]},
    "number bounds": {"type": "number", "minimum": 0.5, "maximum": 0.75},
    "number exclusive": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.02},
    "number multipleOf": {"type": "number", "minimum": -1, "maximum": 1, "multipleOf": 0.25},
    "draft 4 exclusive": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "minimum": 3,
        "maximum": 5,
        "exclusiveMinimum": True,
        "exclusiveMaximum": True,
    },
    "big integers": {"type": "integer", "minimum": 2**62, "maximum": 2**63 - 1},
    "enum of mixed values": {"enum": [1, "two", None, [3], {"four": 4}]},
    "strict object": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": ["integer", "null"], "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "kind": {"anyOf": [{"const": "a"}, {"type": "object", "properties": {}}]},
        },
        "required": ["name", "age", "tags", "kind"],
        "additionalProperties": False,
    },
    "additionalProperties schema": {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0},
        "minProperties": 2,
    },
    "recursive tree": _TREE,
    "recursive via #": _LINKED,
    "allOf of objects": {
        "allOf": [
            {"type": "object", "properties": {"a": _INT}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]
    },
    "$ref with siblings": {"$defs": {"n": _INT}, "$ref": "#/$defs/n", "minimum": 100},
    "true and false subschemas": {
        "type": "object",
        "properties": {"any": True, "never": False},
        "required": ["any"],
    },
    "empty schema": {},
}


def _draws(schema: Any, *, rules: SchemaRules | None = None, retries: int = 32) -> list[Any]:
    compiled = compile_schema(schema, rules or SchemaRules())
    return [generate(compiled, Draws(s), WORDS, retries=retries).value for s in SEEDS]


def _checked_only(schema: Any) -> bool:
    text = json.dumps(schema)
    return any(f'"{k}"' in text for k in CHECKED - {"contains", "minContains"})


@pytest.mark.parametrize("schema", HONOURED.values(), ids=list(HONOURED))
def test_answers_validate_over_many_seeds(schema: Any) -> None:
    # A keyword the generator constructs holds at the first draw; one it checks
    # (keywords.CHECKED) may need more.
    retries = 32 if _checked_only(schema) or "oneOf" in json.dumps(schema) else 0
    for seed, value in zip(SEEDS, _draws(schema, retries=retries), strict=True):
        assert errors(schema, value) == [], (seed, value)


@pytest.mark.parametrize("keyword", sorted(BREAKS_WITHOUT))
def test_a_dropped_keyword_breaks_answers_at_a_measurable_rate(keyword: str) -> None:
    schema = BREAKS_WITHOUT[keyword]
    values = _draws(schema, rules=SchemaRules(drop=frozenset({keyword})))
    broken = sum(bool(errors(schema, v)) for v in values)
    assert broken >= len(values) * 0.15, f"{broken} of {len(values)} broke without {keyword}"


def test_every_nameable_keyword_has_a_case() -> None:
    assert set(BREAKS_WITHOUT) == NAMEABLE
    assert CONSTRUCTED | CHECKED == NAMEABLE


def test_a_seed_replays_and_seeds_differ() -> None:
    compiled = compile_schema(HONOURED["strict object"], SchemaRules())
    first = [generate(compiled, Draws(s), WORDS).value for s in SEEDS]
    again = [generate(compiled, Draws(s), WORDS).value for s in SEEDS]
    assert first == again
    assert len({json.dumps(v) for v in first}) > len(first) // 2


def test_recursion_is_bounded() -> None:
    def depth(node: Any) -> int:
        return 1 + max((depth(c) for c in node["children"]), default=0)

    assert max(depth(v) for v in _draws(_TREE)) <= HARD_DEPTH + 1
    with pytest.raises(SchemaRefused, match="recursion"):
        endless = {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
        generate(compile_schema(endless, SchemaRules()), Draws(1), WORDS)


def _nested(levels: int) -> Any:
    schema: Any = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "rules", "status", "message"),
    [
        (
            {"type": "array", "uniqueItems": True},
            SchemaRules(reject=frozenset({"uniqueItems"})),
            400,
            "uniqueItems is not supported",
        ),
        (
            {"properties": {"a": {"maxLength": 2}}},
            SchemaRules(crash=frozenset({"maxLength"})),
            500,
            "failed on properties.a.maxLength",
        ),
        (
            {"properties": {"a": {"x-kind": 1}}},
            SchemaRules(reject_unknown=True),
            400,
            "unknown keyword properties.a.x-kind",
        ),
        ({"type": "string", "pattern": "(?<=a)b"}, SchemaRules(), 400, "lookaround"),
        ({"type": "string", "pattern": "(a)\\1"}, SchemaRules(), 400, "backreference"),
        ({"$ref": "#/$defs/missing"}, SchemaRules(), 400, "points at nothing"),
        ({"$ref": "https://example.com/s.json"}, SchemaRules(), 400, "only local"),
        ({"type": "integr"}, SchemaRules(), 400, "not a valid JSON Schema at type"),
        ({"minLength": -1}, SchemaRules(), 400, "not a valid JSON Schema"),
        (_nested(MAX_NESTING + 1), SchemaRules(), 400, "nested deeper"),
    ],
)
def test_what_the_converter_refuses(
    schema: Any, rules: SchemaRules, status: int, message: str
) -> None:
    with pytest.raises(SchemaRefused, match=message) as refused:
        compile_schema(schema, rules)
    assert refused.value.status == status


def test_an_unknown_keyword_is_ignored_and_answers_show_it() -> None:
    schema = {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"}, "minProperties": 2}
    values = _draws(schema)
    assert all(len(v) >= 2 for v in values)  # minProperties: honoured
    assert all(errors(schema, v) for v in values)  # propertyNames: not known, not honoured


def test_keyword_names_are_checked() -> None:
    assert parse_names("uniqueItems, maxLength") == {"uniqueItems", "maxLength"}
    with pytest.raises(ValueError, match="propertyNames"):
        parse_names("propertyNames")
