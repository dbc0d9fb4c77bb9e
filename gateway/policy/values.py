"""JSON value checks for policy fields: types, ranges, lengths, enums.

Python's ``True == 1`` and ``1 == 1.0`` do not hold in JSON's type system, so
every comparison here is strict: ``true`` is not an integer, ``1.5`` and ``"42"``
are not integers, and a neutral value ``1`` does not match ``1.0`` or ``true``.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.errors import InvalidRequest

JsonType = Literal["string", "number", "integer", "boolean", "object", "array", "any"]

_ARTICLE = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
PyType = type  # ValueSpec has a field named ``type``
# The exact Python types orjson gives each JSON type (bool is not an integer).
_PY_TYPES: dict[str, tuple[PyType, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "any": (str, int, float, bool, dict, list),
}


_JSON_TYPES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    dict: "object",
    list: "array",
}


def json_type(value: Any) -> str:
    """The JSON type name of a parsed JSON value."""
    name = _JSON_TYPES.get(type(value))
    if name is not None:
        return name
    for kind, name in _JSON_TYPES.items():  # a subclass (bool before int)
        if isinstance(value, kind):
            return name
    return type(value).__name__


def json_equal(a: Any, b: Any) -> bool:
    """Equality in JSON's type system (``true != 1``, ``1 != 1.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return repr(text)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return f"an {json_type(value)}" if isinstance(value, dict) else "an array"
    return str(value)


class ValueSpec(BaseModel):
    """What a JSON value must look like. ``items``/``values`` describe array and object members."""

    model_config = ConfigDict(extra="forbid")

    type: JsonType | list[JsonType] = "any"
    nullable: bool = Field(default=True, description="null is accepted (and means 'not set')")
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_items: int | None = Field(default=None, ge=0)
    max_items: int | None = Field(default=None, ge=0)
    enum: list[Any] | None = None
    min_length: int | None = Field(default=None, ge=0, description="a string's least length")
    max_length: int | None = Field(default=None, ge=0, description="a string's greatest length")
    pattern: str | None = Field(
        default=None, description="a regular expression a string must match (the whole string)"
    )
    items: ValueSpec | None = Field(default=None, description="spec of each array item")
    values: ValueSpec | None = Field(default=None, description="spec of each object value")
    # Worked out once from the fields above (this runs for every field of every
    # request): ``types``, the Python types of the allowed JSON types; ``accepts``,
    # those whose values conform with no further check (most specs are a bare type).
    # Kept in __dict__, not as pydantic private attributes, whose every read goes
    # through BaseModel.__getattr__ (several times slower than the check itself).
    if TYPE_CHECKING:
        types: frozenset[PyType]
        accepts: frozenset[PyType]
        regex: re.Pattern[str] | None
        lengths_only: bool

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return pattern

    def model_post_init(self, context: Any) -> None:
        kinds = self.type if isinstance(self.type, list) else [self.type]
        types = frozenset(t for k in kinds for t in _PY_TYPES[k])
        self.__dict__["types"] = types
        self.__dict__["accepts"] = frozenset()
        constrained = (
            self.minimum is not None
            or self.maximum is not None
            or self.enum is not None
            or self.min_items is not None
            or self.max_items is not None
            or self.items is not None
            or self.values is not None
            or self.min_length is not None
            or self.max_length is not None
            or self.pattern is not None
        )
        self.__dict__["regex"] = re.compile(self.pattern) if self.pattern is not None else None
        # A string that only a length bounds (an embeddings input's members): checked
        # inline by an array's loop, no call per member.
        self.__dict__["lengths_only"] = str in types and self.pattern is None and self.enum is None
        if not constrained:
            self.__dict__["accepts"] = types | {type(None)} if self.nullable else types

    def check(self, value: Any, param: str) -> InvalidRequest | None:
        """The error for ``value`` at ``param``, or None when it conforms."""
        if type(value) in self.accepts:
            return None
        if value is None:
            if self.nullable:
                return None
            return InvalidRequest(
                f"Invalid type for '{param}': expected {self._expected()}, but got null instead.",
                param=param,
                code="invalid_type",
            )
        if type(value) not in self.types:
            return InvalidRequest(
                f"Invalid type for '{param}': expected {self._expected()}, "
                f"but got {_ARTICLE.get(json_type(value), json_type(value))} instead.",
                param=param,
                code="invalid_type",
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            error = self._check_range(value, param)
            if error is not None:
                return error
        if self.enum is not None and not any(json_equal(value, e) for e in self.enum):
            allowed = ", ".join(_show(e) for e in self.enum)
            return InvalidRequest(
                f"Invalid value for '{param}': {_show(value)}. Supported values are: {allowed}.",
                param=param,
                code="invalid_value",
            )
        if isinstance(value, str):
            return self._check_string(value, param)
        if isinstance(value, list):
            return self._check_array(value, param)
        if isinstance(value, dict) and self.values is not None:
            for key, member in value.items():
                error = self.values.check(member, f"{param}.{key}")
                if error is not None:
                    return error
        return None

    def _expected(self) -> str:
        kinds = self.type if isinstance(self.type, list) else [self.type]
        return " or ".join(_ARTICLE.get(k, "any value") for k in kinds)

    def _check_range(self, value: float, param: str) -> InvalidRequest | None:
        if isinstance(value, float) and not math.isfinite(value):
            return InvalidRequest(
                f"Invalid '{param}': expected a finite number.", param=param, code="invalid_value"
            )
        # Named by the field's type, as OpenAI does: "decimal" for a number field
        # (temperature) whatever the client sent, "integer" for an integer one.
        kind = "decimal" if float in self.types else "integer"
        if self.maximum is not None and value > self.maximum:
            return InvalidRequest(
                f"Invalid '{param}': {kind} above maximum value. "
                f"Expected a value <= {_num(self.maximum)}, but got {_num(value)} instead.",
                param=param,
                code=f"{kind}_above_max_value",
            )
        if self.minimum is not None and value < self.minimum:
            return InvalidRequest(
                f"Invalid '{param}': {kind} below minimum value. "
                f"Expected a value >= {_num(self.minimum)}, but got {_num(value)} instead.",
                param=param,
                code=f"{kind}_below_min_value",
            )
        return None

    def _check_string(self, value: str, param: str) -> InvalidRequest | None:
        if (self.min_length is not None and len(value) < self.min_length) or (
            self.max_length is not None and len(value) > self.max_length
        ):
            return _length(param, "string", len(value), self.min_length, self.max_length)
        if self.regex is not None and self.regex.fullmatch(value) is None:
            return InvalidRequest(
                f"Invalid '{param}': string does not match pattern. Expected a string that "
                f"matches the pattern '{self.pattern}'.",
                param=param,
                code="invalid_value",
            )
        return None

    def _check_array(self, value: list[Any], param: str) -> InvalidRequest | None:
        if (self.min_items is not None and len(value) < self.min_items) or (
            self.max_items is not None and len(value) > self.max_items
        ):
            return _length(param, "array", len(value), self.min_items, self.max_items)
        items = self.items
        if items is not None:
            accepts = items.accepts
            for index, item in enumerate(value):
                if type(item) in accepts:
                    continue  # no need to name the item unless it is wrong
                if (
                    type(item) is str
                    and items.lengths_only
                    and (items.min_length or 0) <= len(item)
                    and (items.max_length is None or len(item) <= items.max_length)
                ):
                    continue
                error = items.check(item, f"{param}[{index}]")
                if error is not None:
                    return error
        return None


def _length(
    param: str, kind: str, size: int, minimum: int | None, maximum: int | None
) -> InvalidRequest:
    """OpenAI's error for a string's or an array's (``kind``) length out of bounds (the
    caller checked that it is: a length within bounds costs no call)."""
    if minimum is not None and size < minimum:
        what = f"empty {kind}" if not size else f"{kind} too short"
        bound = f"minimum length {minimum}"
        code = f"empty_{kind}" if not size else f"{kind}_below_min_length"
    else:
        what, bound = f"{kind} too long", f"maximum length {maximum}"
        code = f"{kind}_above_max_length"
    expected = "an array" if kind == "array" else "a string"
    got = f"{size} items" if kind == "array" else f"a string with length {size}"
    return InvalidRequest(
        f"Invalid '{param}': {what}. Expected {expected} with {bound}, but got {got} instead.",
        param=param,
        code=code,
    )


def _num(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return str(value)
