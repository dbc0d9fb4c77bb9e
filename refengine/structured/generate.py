"""A JSON value drawn from an effective schema with the row's draws.

The generator builds the value to satisfy the keywords it constructs (keywords.py):
type (one or a list), enum, const, properties in schema order, required (an optional
property appears half the time), additionalProperties (false: none; a schema or
absent: now and then an extra key, as JSON Schema allows), min/maxProperties, items,
prefixItems, min/maxItems, uniqueItems, anyOf and oneOf (a branch drawn), allOf (the
branches merged), local ``$ref`` with recursion (past ``SOFT_DEPTH`` references deep it
takes the shortest way out: no optional properties, the fewest items, the first
branch that ends; past ``HARD_DEPTH`` that way is a dead end), strings from the
vocabulary or a pattern or a format with their lengths, numbers within their bounds
and multipleOf. Then the whole value is checked against the effective schema, and
drawn again (``RETRIES`` times at most) while it fails: that is how not, if/then/else
and the other CHECKED keywords are honoured, and what catches a pattern or a format
whose lengths the first draw missed. An unconstrained value is small and varied, so
a keyword left out (dropped, unknown) shows in the answers.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from refengine.structured import regex
from refengine.structured.formats import draw_format, known
from refengine.structured.keywords import ANNOTATIONS, FAMILIES
from refengine.structured.schema import Compiled, SchemaRefused
from sampler.draws import Draws

RETRIES = 32
SOFT_DEPTH = 3
HARD_DEPTH = 12
MAX_STEPS = 50_000  # values built per answer: a schema that needs more is refused
DEFAULT_SPAN = 1000  # an unbounded number lies within this of its one bound, or of 0
EXTRA_KEY = 0.2  # the chance of an extra key in an object whose extra keys are open
_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")


class _DeadEnd(Exception):
    """This branch cannot be finished here (too deep, or unsatisfiable): try another."""


@dataclass(frozen=True)
class Drawn:
    """The value, whether it validates, and how many draws of it were made."""

    value: Any
    valid: bool
    attempts: int


def generate(
    compiled: Compiled, draws: Draws, words: Sequence[str], *, retries: int = RETRIES
) -> Drawn:
    """A value for ``compiled``, drawn again up to ``retries`` times while it fails."""
    value: Any = None
    for attempt in range(1, retries + 2):
        try:
            value = _Generator(compiled, draws, words).value(compiled.schema, 0)
        except _DeadEnd:
            if attempt == 1:
                raise SchemaRefused(
                    "the schema has no value (none at all, or none within the recursion "
                    f"bound of {HARD_DEPTH} references)"
                ) from None
            break
        if compiled.is_valid(value):
            return Drawn(value, True, attempt)
    return Drawn(value, False, retries + 1)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One schema that asks what ``a`` and ``b`` both ask, as far as a merge can say."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif key == "properties":
            props = dict(out[key])
            for name, sub in value.items():
                props[name] = {"allOf": [props[name], sub]} if name in props else sub
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
            out[key] = max(out[key], value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
            out[key] = min(out[key], value)
        elif key == "type":
            first = out[key] if isinstance(out[key], list) else [out[key]]
            second = value if isinstance(value, list) else [value]
            both = [t for t in first if t in second or (t == "integer" and "number" in second)]
            both += [t for t in second if t == "integer" and "number" in first and t not in both]
            if not both:
                raise _DeadEnd
            out[key] = both if len(both) > 1 else both[0]
        elif key == "enum":
            out[key] = [v for v in out[key] if v in value]
        elif key == "additionalProperties" and (value is False or out[key] is False):
            out[key] = False
        elif key in ("items", "additionalProperties") and value != out[key]:
            out[key] = {"allOf": [out[key], value]}
        elif key == "not" and value != out[key]:
            out[key] = {"anyOf": [out[key], value]}  # not a and not b
        elif key == "uniqueItems":
            out[key] = bool(out[key] or value)
    return out


def _bounds(schema: dict[str, Any]) -> tuple[Any, bool, Any, bool]:
    """(low, exclusive, high, exclusive), draft 2020-12 or draft 4's boolean form."""
    low, high = schema.get("minimum"), schema.get("maximum")
    low_x = high_x = False
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlow, bool):
        low_x = xlow
    elif isinstance(xlow, int | float) and (low is None or xlow >= low):
        low, low_x = xlow, True
    if isinstance(xhigh, bool):
        high_x = xhigh
    elif isinstance(xhigh, int | float) and (high is None or xhigh <= high):
        high, high_x = xhigh, True
    return low, low_x, high, high_x


def _span(low: Any, high: Any) -> tuple[Any, Any]:
    if low is None and high is None:
        return -DEFAULT_SPAN, DEFAULT_SPAN
    if low is None:
        return high - DEFAULT_SPAN, high
    if high is None:
        return low, low + DEFAULT_SPAN
    return low, high


class _Generator:
    def __init__(self, compiled: Compiled, draws: Draws, words: Sequence[str]) -> None:
        self.compiled = compiled
        self.draws = draws
        self.words = words
        self.steps = 0
        self.loose = 0  # nesting inside an unconstrained value

    def value(self, schema: Any, refs: int) -> Any:
        """A value for ``schema``, ``refs`` references deep."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise SchemaRefused(f"the schema needs more than {MAX_STEPS} values for one answer")
        if schema is True or schema == {}:
            return self.anything(refs)
        if not isinstance(schema, dict):
            raise _DeadEnd  # false: nothing validates
        if "$ref" in schema:
            if refs >= HARD_DEPTH:
                raise _DeadEnd
            target = self.compiled.resolve(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
            return self.value({"allOf": [target, rest]} if rest else target, refs + 1)
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for branch in schema["allOf"]:
                resolved, refs = self._resolved(branch, refs)
                merged = _merge(merged, resolved)
            return self.value(merged, refs)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k != key}
                branches = list(schema[key])
                if refs >= SOFT_DEPTH:  # deep: the branches that refer nowhere first
                    branches.sort(key=lambda b: "$ref" in json.dumps(b))
                return self._first_that_ends(
                    [functools.partial(self._branch, b, rest, refs) for b in branches], refs
                )
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if "enum" in schema:
            options = schema["enum"]
            if not options:
                raise _DeadEnd
            return copy.deepcopy(options[self.draws.pick(len(options))])
        kind = schema.get("type")
        if isinstance(kind, list):
            if not kind:
                raise _DeadEnd
            return self._first_that_ends(
                [functools.partial(self.typed, k, schema, refs) for k in kind], refs
            )
        if kind is None:
            families = [name for name, keys in FAMILIES.items() if keys & schema.keys()]
            if len(families) != 1:
                return self.anything(refs)
            kind = families[0]
        return self.typed(kind, schema, refs)

    def _branch(self, branch: Any, rest: dict[str, Any], refs: int) -> Any:
        resolved, refs = self._resolved(branch, refs)
        return self.value(_merge(resolved, rest), refs)

    def _resolved(self, schema: Any, refs: int) -> tuple[dict[str, Any], int]:
        """A branch with its own $ref followed (so that merging sees its keywords), and
        the references deep it then is."""
        while isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"$ref"}:
            if refs >= HARD_DEPTH:
                raise _DeadEnd
            schema = self.compiled.resolve(schema["$ref"])
            refs += 1
        if schema is True:
            return {}, refs
        if not isinstance(schema, dict):
            raise _DeadEnd
        return schema, refs

    def _first_that_ends(self, options: Sequence[Callable[[], Any]], refs: int) -> Any:
        """Options tried from a drawn one on (from the first when deep), until one ends."""
        start = 0 if refs >= SOFT_DEPTH else self.draws.pick(len(options))
        for i in range(len(options)):
            try:
                return options[(start + i) % len(options)]()
            except _DeadEnd:
                continue
        raise _DeadEnd

    def typed(self, kind: str, schema: dict[str, Any], refs: int) -> Any:
        """A value of JSON type ``kind`` under ``schema``."""
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.draws.chance(0.5)
        if kind == "null":
            return None
        if kind == "array":
            return self.array(schema, refs)
        if kind == "object":
            return self.object(schema, refs)
        raise _DeadEnd

    def anything(self, refs: int) -> Any:
        """Any small JSON value (nested values inside it are scalars)."""
        kinds = _TYPES if self.loose == 0 and refs < SOFT_DEPTH else _TYPES[:5]
        self.loose += 1
        try:
            return self.typed(kinds[self.draws.pick(len(kinds))], {}, refs)
        finally:
            self.loose -= 1

    def word(self) -> str:
        return self.words[self.draws.pick(len(self.words))]

    def string(self, schema: dict[str, Any]) -> str:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        pattern, fmt = schema.get("pattern"), schema.get("format")
        if (isinstance(fmt, str) and known(fmt)) or isinstance(pattern, str):
            text = ""
            for _ in range(RETRIES):
                text = (
                    regex.draw(self.compiled.patterns[pattern], self.draws)
                    if isinstance(pattern, str)
                    else draw_format(str(fmt), self.draws, self.words)
                )
                if len(text) >= low and (high is None or len(text) <= high):
                    break
            return text
        if high is None and not low:
            return " ".join(self.word() for _ in range(self.draws.integer(1, 5)))
        top = low + 40 if high is None else min(high, low + 40)
        if top < low:
            raise _DeadEnd
        size = self.draws.integer(min(max(low, 1), top), top)
        text = ""
        while len(text) < size:
            text = f"{text} {self.word()}" if text else self.word()
        text = text[:size]
        return text[:-1] + "s" if text.endswith(" ") else text

    def integer(self, schema: dict[str, Any]) -> int:
        low, low_x, high, high_x = _bounds(schema)
        lo = None if low is None else (math.floor(low) + 1 if low_x else math.ceil(low))
        hi = None if high is None else (math.ceil(high) - 1 if high_x else math.floor(high))
        lo, hi = _span(lo, hi)
        step = 1
        multiple = schema.get("multipleOf")
        if isinstance(multiple, int | float) and multiple > 0:
            step = Fraction(str(multiple)).numerator  # integers k*m/1 that m divides
        first, last = -(-lo // step), hi // step
        if first > last:
            raise _DeadEnd
        return int(self.draws.integer(first, last) * step)

    def number(self, schema: dict[str, Any]) -> int | float:
        low, low_x, high, high_x = _bounds(schema)
        lo, hi = _span(low, high)
        multiple = schema.get("multipleOf")
        exact = isinstance(multiple, int | float) and multiple > 0
        unit = Fraction(str(multiple)) if exact else Fraction(1, 100)
        first = math.ceil(Fraction(str(lo)) / unit)
        last = math.floor(Fraction(str(hi)) / unit)
        if low_x and first * unit == Fraction(str(lo)):
            first += 1
        if high_x and last * unit == Fraction(str(hi)):
            last -= 1
        if first > last:
            if not exact and (lo < hi or not (low_x or high_x)):
                return float((lo + hi) / 2)  # a range narrower than the grid of hundredths
            raise _DeadEnd
        value = self.draws.integer(first, last) * unit
        return int(value) if isinstance(multiple, int) else float(value)

    def array(self, schema: dict[str, Any], refs: int) -> list[Any]:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # draft 4-7: the list form, then additionalItems
            prefix, items = items, schema.get("additionalItems")
        prefix = prefix if isinstance(prefix, list) else []
        contains = schema.get("contains")
        need = schema.get("minContains", 1) if contains is not None else 0
        low = max(schema.get("minItems", 0), need)
        high = schema.get("maxItems")
        if items is False:
            high = len(prefix) if high is None else min(high, len(prefix))
        if high is not None and high < low:
            raise _DeadEnd
        if refs >= SOFT_DEPTH:
            size = low
        elif prefix:
            size = max(low, len(prefix) if high is None else min(high, len(prefix)))
        else:
            top = low + 3 if high is None else min(high, low + 3)
            size = self.draws.integer(low, top)
        unique = schema.get("uniqueItems") is True
        out: list[Any] = []
        seen: set[str] = set()
        for i in range(size):
            sub = prefix[i] if i < len(prefix) else (items if items is not None else True)
            for _ in range(RETRIES if unique else 1):
                value = self.value(sub, refs)
                canonical = json.dumps(value, sort_keys=True)
                if not unique or canonical not in seen:
                    break
            else:
                if len(out) >= low:
                    break
                raise _DeadEnd
            seen.add(canonical)
            out.append(value)
        if need and len(out) >= need:  # contains: minContains items drawn from it
            item = items if isinstance(items, dict) else {}
            slots = list(range(len(out)))
            for _ in range(need):
                at = slots.pop(self.draws.pick(len(slots)))
                out[at] = self.value({"allOf": [item, contains]} if item else contains, refs)
        return out

    def object(self, schema: dict[str, Any], refs: int) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = list(
            dict.fromkeys(r for r in schema.get("required") or [] if isinstance(r, str))
        )
        extra = schema.get("additionalProperties", None)
        low = schema.get("minProperties", 0)
        high = schema.get("maxProperties")
        deep = refs >= SOFT_DEPTH
        if high is not None and len(required) > high:
            raise _DeadEnd
        room = None if high is None else high - len(required)
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required:
                out[name] = self.value(sub, refs)
            elif (room is None or room > 0) and not deep and self.draws.chance(0.5):
                try:
                    out[name] = self.value(sub, refs)
                except _DeadEnd:  # an optional property that cannot be (false): left out
                    continue
                room = None if room is None else room - 1
        for name in required:
            if name not in out:
                if extra is False:
                    raise _DeadEnd
                out[name] = self.value(True if extra is None else extra, refs)
        optional = [n for n in props if n not in out]
        while len(out) < low:  # minProperties: optional properties first, then extra keys
            if optional:
                name = optional.pop(0)
                out[name] = self.value(props[name], refs)
            elif extra is not False:
                out[self._fresh_key(out, props)] = self.value(
                    True if extra is None else extra, refs
                )
            else:
                raise _DeadEnd
        if extra is not False and not deep:
            wanted = (
                (1 if self.draws.chance(EXTRA_KEY) else 0) if props else self.draws.integer(0, 3)
            )
            for _ in range(wanted):
                if high is not None and len(out) >= high:
                    break
                out[self._fresh_key(out, props)] = self.value(
                    True if extra is None else extra, refs
                )
        return out

    def _fresh_key(self, out: dict[str, Any], props: dict[str, Any]) -> str:
        for _ in range(RETRIES):
            name = self.word()
            if name not in out and name not in props:
                return name
        return f"key_{len(out)}"
