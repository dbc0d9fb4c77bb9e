"""The validator library behind the schema checks: jsonschema-rs, chosen by measurement.

``python -m bench.cost validators`` times the candidates on a typical schema
(docs/structured-outputs.md#cost has the figures): jsonschema-rs checks a conforming
answer in about a microsecond and the metaschema in tens of microseconds, where
jsonschema (pure Python) takes hundreds of microseconds and milliseconds, and
fastjsonschema compiles a schema in about 10 ms (and knows no draft after 7). Its
validators are built once per distinct schema and kept (bounded); nothing is ever
fetched (``offline``: a remote ``$ref`` is refused before this, and would fail here).
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import orjson

# Distinct schemas whose validators are kept (a client sends the same few again and
# again); the oldest goes first when full.
MOST_KEPT = 512
_kept: dict[bytes, Any] = {}


def schema_key(schema: Any) -> bytes:
    """The cache key of a parsed schema: its JSON text as written."""
    return orjson.dumps(schema)


def metaschema_error(schema: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where ``schema`` breaks the JSON Schema metaschema (its draft's, by ``$schema``;
    2020-12 otherwise) and what, or None."""
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        return tuple(exc.instance_path), _first_line(exc.message)
    except (jsonschema_rs.ReferencingError, ValueError) as exc:
        return (), _first_line(str(exc))
    return None


def validator(schema: Any, key: bytes | None = None) -> Any:
    """The validator of ``schema`` (formats asserted), built once per distinct schema;
    raises ValueError with the library's words when it cannot be built (a pattern
    that is not a regular expression, a reference to nothing)."""
    key = schema_key(schema) if key is None else key
    found = _kept.get(key)
    if found is not None:
        return found
    try:
        found = jsonschema_rs.validator_for(schema, validate_formats=True, offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError) as exc:
        raise ValueError(_first_line(str(getattr(exc, "message", exc)))) from None
    if len(_kept) >= MOST_KEPT:
        del _kept[next(iter(_kept))]
    _kept[key] = found
    return found


Path = tuple[str | int, ...]


def first_error(check: Any, value: Any) -> tuple[Path, Path, str] | None:
    """The first place ``value`` breaks the validator ``check``: its path in the value,
    the path of the keyword broken in the schema (its last step the keyword), and the
    library's message; None when it conforms."""
    if check.is_valid(value):
        return None
    for error in check.iter_errors(value):
        return tuple(error.instance_path), tuple(error.schema_path), _first_line(error.message)
    return None


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= 200 else line[:197] + "..."
