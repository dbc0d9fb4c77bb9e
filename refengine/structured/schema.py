"""A request's JSON Schema as the engine's converter reads it: checked, and stripped of
what the engine does not honour.

``compile_schema`` walks the schema once: a keyword the engine is told to crash on is
a 500 and one it is told to refuse a 400 (SchemaRefused), as converters that fail or
refuse do; a dropped keyword (``--drop-keywords``) and a keyword it does not know are
taken out, so the generator acts as if they were absent (an unknown keyword is
refused instead under ``reject_unknown``). What is left is the effective schema: its
patterns are parsed (the regex subset, regex.py), its ``$ref`` must point inside it,
and it must be valid JSON Schema (jsonschema's meta-schema check); its validator is
what the generator checks answers against. Nesting past ``MAX_NESTING`` levels or
more than ``MAX_NODES`` subschemas is refused, as a converter's limits refuse them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as MetaSchemaError

from refengine.structured import regex
from refengine.structured.keywords import KNOWN, SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_ONE

MAX_NESTING = 64
MAX_NODES = 20_000


class SchemaRefused(Exception):
    """A schema the engine will not turn into a grammar: 400 (refused) or 500 (crashed)."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param: str | None = None  # the request field of the schema, once known


@dataclass(frozen=True)
class SchemaRules:
    """What the engine's converter does with keywords: drop (ignore), refuse (400), crash
    (500); and whether an unknown keyword is ignored (the default) or refused."""

    drop: frozenset[str] = frozenset()
    reject: frozenset[str] = frozenset()
    crash: frozenset[str] = frozenset()
    reject_unknown: bool = False


@dataclass
class Compiled:
    """The effective schema, its validator and its parsed patterns."""

    schema: Any
    validator: Any
    patterns: dict[str, regex.Node] = field(default_factory=dict)

    def resolve(self, ref: str) -> Any:
        """The subschema a local ``$ref`` points at (checked by compile_schema)."""
        return _pointer(self.schema, ref)

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` validates against the effective schema."""
        return bool(self.validator.is_valid(value))


@dataclass
class _Walk:
    rules: SchemaRules
    nodes: int = 0
    refs: list[tuple[str, str]] = field(default_factory=list)  # (ref, where)
    patterns: dict[str, regex.Node] = field(default_factory=dict)


def compile_schema(schema: Any, rules: SchemaRules) -> Compiled:
    """The effective schema of ``schema`` under ``rules``; SchemaRefused when refused."""
    walk = _Walk(rules)
    effective = _strip(schema, walk, "", 0)
    for ref, where in walk.refs:
        if not ref.startswith("#"):
            raise SchemaRefused(f"{where}$ref {ref!r}: only local references (#...) are supported")
        try:
            _pointer(effective, ref)
        except LookupError:
            raise SchemaRefused(f"{where}$ref {ref!r} points at nothing") from None
    cls = jsonschema.validators.validator_for(effective, default=Draft202012Validator)
    try:
        cls.check_schema(effective)
    except MetaSchemaError as exc:
        at = ".".join(str(p) for p in exc.path)
        raise SchemaRefused(
            f"not a valid JSON Schema{f' at {at}' if at else ''}: {exc.message}"
        ) from exc
    return Compiled(effective, cls(effective), walk.patterns)


def _strip(node: Any, walk: _Walk, where: str, depth: int) -> Any:
    """``node`` without dropped and unknown keywords, at every schema position."""
    if not isinstance(node, dict):
        return node
    if depth > MAX_NESTING:
        raise SchemaRefused(f"the schema is nested deeper than {MAX_NESTING} levels")
    walk.nodes += 1
    if walk.nodes > MAX_NODES:
        raise SchemaRefused(f"the schema has more than {MAX_NODES} subschemas")
    rules = walk.rules
    out: dict[str, Any] = {}
    for key, value in node.items():
        at = f"{where}{key}"
        if key in rules.crash:
            raise SchemaRefused(f"the grammar compiler failed on {at}", status=500)
        if key in rules.reject:
            raise SchemaRefused(f"JSON schema conversion failed: {at} is not supported")
        if key not in KNOWN:
            if rules.reject_unknown:
                raise SchemaRefused(f"JSON schema conversion failed: unknown keyword {at}")
            continue
        if key in rules.drop:
            continue
        out[key] = _inner(key, value, walk, at, depth)
    return out


def _inner(key: str, value: Any, walk: _Walk, at: str, depth: int) -> Any:
    if key == "$ref" and isinstance(value, str):
        walk.refs.append((value, at[: -len(key)]))
    elif key == "pattern" and isinstance(value, str) and value not in walk.patterns:
        try:
            walk.patterns[value] = regex.parse(value)
        except regex.PatternError as exc:
            raise SchemaRefused(f"JSON schema conversion failed: {at} {value!r}: {exc}") from exc
    if key in SCHEMA_MAPS and isinstance(value, dict):
        return {name: _strip(sub, walk, f"{at}.{name}.", depth + 1) for name, sub in value.items()}
    if key in SCHEMA_LISTS and isinstance(value, list):
        return [_strip(sub, walk, f"{at}[{i}].", depth + 1) for i, sub in enumerate(value)]
    if key in SCHEMA_ONE:
        return _strip(value, walk, f"{at}.", depth + 1)
    return value


def _pointer(root: Any, ref: str) -> Any:
    """The value at JSON pointer ``ref`` (``#``, ``#/$defs/x``); LookupError if none."""
    fragment = ref[1:]
    if fragment and not fragment.startswith("/"):
        raise LookupError(ref)  # anchors ("#name") are not resolved
    node = root
    for raw in fragment.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise LookupError(ref)
    return node
