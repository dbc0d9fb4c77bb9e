"""The JSON-Schema keywords the reference engine knows, and how it honours each.

``CONSTRUCTED``: the generator builds every answer to satisfy them (the strict subset
of OpenAI's structured outputs, and uniqueItems, minProperties/maxProperties,
allOf, oneOf taken as anyOf). ``CHECKED``: honoured by drawing again (up to
``generate.RETRIES`` times) until the answer validates: not, if/then/else,
dependentRequired, dependentSchemas, contains and its bounds, oneOf's exclusivity.
``ANNOTATIONS``: read (``$defs``) or without effect on an answer. Every other keyword is
unknown: ignored, as a grammar backend ignores what its converter does not read
(patternProperties, propertyNames, unevaluatedProperties, ...), unless the engine is
told to refuse unknown keywords. (contains is also constructed: minContains items
are drawn from it; maxContains is checked.)
"""

from __future__ import annotations

CONSTRUCTED = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "pattern",
        "format",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minProperties",
        "maxProperties",
    }
)
CHECKED = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "contains",
        "minContains",
        "maxContains",
    }
)
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
KNOWN = CONSTRUCTED | CHECKED | ANNOTATIONS
# What --drop-keywords, --reject-keywords and --crash-keywords may name.
NAMEABLE = CONSTRUCTED | CHECKED

# Where a keyword's value holds subschemas: a map of them, one, or a list.
SCHEMA_MAPS = frozenset(
    {"properties", "$defs", "definitions", "dependentSchemas", "patternProperties"}
)
SCHEMA_ONE = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "items",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf", "items"})

# The keywords of one instance type each: a schema without "type" that uses those of
# exactly one family is taken as that type, as grammar converters take it.
FAMILIES = {
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "dependentRequired",
        }
    ),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}),
    "string": frozenset({"pattern", "format", "minLength", "maxLength"}),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    ),
}


def parse_names(text: str) -> frozenset[str]:
    """``uniqueItems,maxLength`` as a set; ValueError naming what is not a keyword here."""
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(names - NAMEABLE)
    if unknown:
        raise ValueError(
            f"not keywords the engine honours: {', '.join(unknown)} "
            f"(it honours {', '.join(sorted(NAMEABLE))})"
        )
    return names
