"""Duplicate keys in a request's JSON, found cheaply and refused.

orjson keeps the last of ``{"n": 3, "n": 1}``; an engine whose parser keeps
the first would get ``n: 3`` after the policy passed ``n: 1``. RFC 8259 leaves
duplicate names to each parser, so an ambiguous body gets a 400 naming the key.

Finding them costs one re-serialisation: every member of a JSON object has
exactly one ``:`` outside strings, and orjson writes a colon inside a string
as itself, so ``raw`` holds more colons than ``orjson.dumps(parsed)`` exactly
when a parser dropped members. Only a ``\\u003a`` escape (a colon that is no
colon in ``raw``) defeats the count; then (any ``\\u003`` escape: a substring
scan, cheaper than a pattern), and to name the key once found, the slow parser
walks the text.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from gateway.errors import InvalidRequest

# Any escape \u0030-\u003f: a colon's (\u003a, \u003A) among them.
_ESCAPE_3X = b"\\u003"


class _Pairs(list[tuple[str, Any]]):
    """An object's members in order, duplicates kept."""


def _first_duplicate(value: Any, path: str) -> str | None:
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, member in value:
            where = f"{path}.{key}" if path else key
            if key in seen:
                return where
            seen.add(key)
            found = _first_duplicate(member, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_duplicate(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def find_duplicate_key(raw: bytes) -> str | None:
    """The path of the first duplicated key in JSON text ``raw`` (slow), or None."""
    return _first_duplicate(json.loads(raw, object_pairs_hook=_Pairs), "")


def check_duplicate_keys(raw: bytes, parsed: Any) -> None:
    """InvalidRequest if JSON text ``raw`` (parsed by orjson as ``parsed``) repeats a key
    in any object, or nests too deeply to be forwarded."""
    try:
        written = orjson.dumps(parsed)
    except orjson.JSONEncodeError:
        raise InvalidRequest(
            "The JSON body of your request is nested too deeply.", code="invalid_json"
        ) from None
    if _ESCAPE_3X not in raw and raw.count(b":") == written.count(b":"):
        return
    path = find_duplicate_key(raw)
    if path is not None:
        raise InvalidRequest(
            f"The JSON body of your request repeats the key '{path}'; each key may appear "
            "only once in an object.",
            param=path,
            code="duplicate_key",
        )
