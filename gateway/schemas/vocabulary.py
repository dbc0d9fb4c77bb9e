"""JSON Schema's keywords, by what their values are: where a schema holds other schemas.

Draft 2020-12's vocabularies, plus draft-07's ``definitions``, ``dependencies`` and
``additionalItems`` (still what many generators write). A keyword not listed in
``VOCABULARY`` is not a JSON-Schema keyword at all (``discriminator``, ``x-...``):
JSON Schema says to ignore it, and validators and engines do.
"""

from __future__ import annotations

# A schema, as the keyword's value (or true/false).
ONE_SCHEMA = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
# A mapping of names to schemas (``dependencies``: a schema or a list of names each).
SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
# An array of schemas (``items`` as an array: draft-07's tuple form).
SCHEMA_ARRAYS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf", "items"})
# The steps that go one level deeper in the answer (a property's value, an array's member).
INSTANCE_STEPS = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
    }
)
# Never constrain an answer: annotations and the core's bookkeeping.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
    }
)
# Keywords that say something about the answer: what ``unknown_keywords`` governs.
ASSERTING = frozenset(
    {
        *ONE_SCHEMA,
        *SCHEMA_MAPS,
        *SCHEMA_ARRAYS,
        "$ref",
        "$dynamicRef",
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "format",
    }
)
VOCABULARY = ASSERTING | ANNOTATIONS
