"""One pass over a request's JSON Schema: its nodes, and the limits that keep a hostile one out.

The pass is iterative (an explicit stack, never Python recursion), so a schema nested
a hundred thousand levels deep costs the limit's worth of steps and no stack: it
stops at the first node past a limit. What it finds (every schema node with its path,
every ``$ref``, every pattern) is what the later checks read (refs.py, strict.py,
keywords.py), so the schema is walked once. Each limit is its own problem, with its
own code and the path of the node that crossed it (docs/structured-outputs.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.schemas.patterns import unsafe_shape
from gateway.schemas.rules import SchemaLimits
from gateway.schemas.vocabulary import INSTANCE_STEPS, ONE_SCHEMA, SCHEMA_ARRAYS, SCHEMA_MAPS

# A path inside a schema: its steps (a key, or an index in an array).
Steps = tuple[str | int, ...]
# Past this, a schema is refused even with max_nesting off: the gateway's own checks and
# its validator library stay far inside their stacks.
HARD_NESTING = 512
# The code of a schema that is not valid (OpenAI's: invalid_json_schema for a response
# format, invalid_function_parameters for a function), resolved where the schema stands.
INVALID = "(invalid)"


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with a schema: where (steps inside it), the error code, the message
    (``{path}`` stands for the full path) and which part of the policy says so."""

    steps: Steps
    code: str
    message: str


@dataclass(slots=True)
class Survey:
    """A schema's nodes (object nodes, with their paths), its ``$ref``s and patterns."""

    nodes: list[tuple[Steps, dict[str, Any]]] = field(default_factory=list)
    refs: list[tuple[Steps, Any]] = field(default_factory=list)
    patterns: list[tuple[Steps, str]] = field(default_factory=list)


def _limit(name: str, steps: Steps, code: str, what: str, value: int) -> Problem:
    return Problem(
        steps,
        code,
        f"Invalid '{{path}}': {what} {value}, this deployment's limit (json_schema.limits.{name}).",
    )


def survey(schema: Any, limits: SchemaLimits) -> Survey | Problem:
    """The nodes, refs and patterns of ``schema``, or the first limit it passes."""
    found = Survey()
    max_depth = limits.max_depth
    max_nesting = min(limits.max_nesting or HARD_NESTING, HARD_NESTING)
    max_nodes = limits.max_nodes
    max_properties = limits.max_properties
    max_enum = limits.max_enum_values
    large_enum = limits.large_enum
    max_large = limits.max_large_enum_chars
    max_chars = limits.max_total_chars
    max_pattern = limits.max_pattern_length
    nodes = properties = enums = chars = 0
    # (node, its steps, answer depth, nesting)
    stack: list[tuple[Any, Steps, int, int]] = [(schema, (), 0, 0)]
    while stack:
        node, steps, depth, nesting = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            return _limit(
                "max_nodes", (), "schema_too_large", "the schema has more nodes than", max_nodes
            )
        if nesting > max_nesting:
            name = (
                "max_nesting"
                if limits.max_nesting is not None
                else "max_nesting (and the gateway's own bound)"
            )
            return _limit(
                name,
                steps,
                "schema_too_deep",
                "schemas nest inside one another deeper than",
                max_nesting,
            )
        if max_depth is not None and depth > max_depth:
            return _limit(
                "max_depth", steps, "schema_too_deep", "the schema nests deeper than", max_depth
            )
        if type(node) is not dict:
            continue  # a boolean schema (true/false), or not a schema: the metaschema says
        found.nodes.append((steps, node))
        children: list[tuple[Any, Steps, int, int]] = []
        for key, value in node.items():
            down = depth + 1 if key in INSTANCE_STEPS else depth
            if key in SCHEMA_MAPS and type(value) is dict:
                if key in ("properties", "$defs", "definitions"):
                    chars += sum(map(len, value))
                if key == "properties":
                    properties += len(value)
                    if max_properties is not None and properties > max_properties:
                        return _limit(
                            "max_properties",
                            (*steps, key),
                            "schema_too_many_properties",
                            "the schema has more object properties in all than",
                            max_properties,
                        )
                for name, sub in value.items():
                    if key == "patternProperties":
                        found.patterns.append(((*steps, key, name), name))
                    if type(sub) in (dict, bool):
                        children.append((sub, (*steps, key, name), down, nesting + 1))
            elif key in SCHEMA_ARRAYS and type(value) is list:
                for index, sub in enumerate(value):
                    children.append((sub, (*steps, key, index), down, nesting + 1))
            elif key in ONE_SCHEMA and type(value) in (dict, bool):
                children.append((value, (*steps, key), down, nesting + 1))
            elif key == "enum" and type(value) is list:
                enums += len(value)
                if max_enum is not None and enums > max_enum:
                    return _limit(
                        "max_enum_values",
                        (*steps, key),
                        "schema_enum_too_large",
                        "the schema has more enum values in all than",
                        max_enum,
                    )
                size = sum(len(v) for v in value if type(v) is str)
                chars += size
                if (
                    large_enum is not None
                    and max_large is not None
                    and len(value) > large_enum
                    and size > max_large
                ):
                    return _limit(
                        "max_large_enum_chars",
                        (*steps, key),
                        "schema_enum_too_long",
                        f"an enum of more than {large_enum} strings totals more characters than",
                        max_large,
                    )
            elif key == "const" and type(value) is str:
                chars += len(value)
            elif key == "pattern" and type(value) is str:
                found.patterns.append(((*steps, key), value))
            elif key == "$ref":
                found.refs.append(((*steps, key), value))
        if max_chars is not None and chars > max_chars:
            return _limit(
                "max_total_chars",
                (),
                "schema_strings_too_long",
                "its property names, definition names, enum and const values total more "
                "characters than",
                max_chars,
            )
        stack.extend(reversed(children))  # visited in the order they are written
    for steps, pattern in found.patterns:
        if max_pattern is not None and len(pattern) > max_pattern:
            return _limit(
                "max_pattern_length",
                steps,
                "schema_pattern_too_long",
                "a pattern is longer than",
                max_pattern,
            )
        shape = unsafe_shape(pattern)
        if shape is not None:
            return Problem(
                steps,
                "schema_pattern_unsafe",
                f"Invalid '{{path}}': the pattern {shape}, a shape that can take a regular-"
                "expression engine exponential time (catastrophic backtracking); write it "
                "without nested repetition.",
            )
    return found
