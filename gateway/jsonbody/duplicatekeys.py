"""Duplicate keys in a request's JSON, found at the cost of a parse and refused.

orjson keeps the last of ``{"n": 3, "n": 1}``; an engine whose parser keeps
the first would get ``n: 3`` after the policy passed ``n: 1``. RFC 8259 leaves
duplicate names to each parser, so an ambiguous body gets a 400 naming the key.

Most bodies are cleared by one re-serialisation: every member of a JSON object
has exactly one ``:`` outside strings, and orjson writes a colon inside a string
as itself, so ``raw`` holds more colons than ``orjson.dumps(parsed)`` exactly
when a parser dropped members. Only a ``\\u003a`` escape (a colon that is no
colon in ``raw``) defeats the count. Then (any ``\\u003`` escape: a substring
scan, cheaper than a pattern), or where the counts differ, jiter (Rust, the
parser of pydantic and the openai SDK) parses the text again with
``catch_duplicate_keys``: about the cost of one more parse, whatever the body
holds (the stdlib's ``object_pairs_hook`` calls Python once per object, so a
body of many small objects cost a hundred times a parse). jiter stops at the
first duplicate and says where (line and byte column, just past its colon): the
text up to there, with a value of our own after that colon, parsed leniently
(``partial_mode``), is the body's open containers down to the object that
repeats the key, so the key's path is read off its rightmost branch with one
step a level.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Any

import jiter
import orjson

from gateway.errors import InvalidRequest

# Any escape \u0030-\u003f: a colon's (\u003a, \u003A) among them.
_ESCAPE_3X = b"\\u003"
_DUPLICATE = re.compile(r'Detected duplicate key "(.*)" at line (\d+) column (\d+)', re.DOTALL)
_NEWLINE = re.compile(b"\n")
_TOO_DEEP = "The JSON body of your request is nested too deeply."


def _offset(raw: bytes, line: int, column: int) -> int:
    """The byte offset of jiter's (1-based line, byte column; column 0: the line's
    newline itself) in ``raw``, found without a Python step per line."""
    start = 0
    if line > 1:
        found = next(itertools.islice(_NEWLINE.finditer(raw), line - 2, None), None)
        if found is None:
            return -1
        start = found.end()
    return start + column - 1


def _path_at(raw: bytes, offset: int) -> str | None:
    """The path of the key whose colon ends ``raw[:offset]`` (None if the text there is
    not what jiter's position promised)."""
    if offset <= 0 or raw[offset - 1 : offset] != b":":
        return None
    # A value the body cannot hold (random), where the repeated key's value was.
    mark = os.urandom(12).hex()
    try:
        node: Any = jiter.from_json(
            raw[:offset] + b'"' + mark.encode() + b'"', partial_mode=True, cache_mode="keys"
        )
    except ValueError:
        return None
    path = ""
    # Each container on the way is the last member of the one before (still open
    # where the duplicate stands); the one holding ``mark`` repeats the key.
    while True:
        if isinstance(node, dict):
            values = list(node.values())
            if mark in values:
                key = list(node)[values.index(mark)]
                return f"{path}.{key}" if path else key
            if not node:
                return None
            key = next(reversed(node))
            path = f"{path}.{key}" if path else key
            node = node[key]
        elif isinstance(node, list) and node:
            path = f"{path}[{len(node) - 1}]"
            node = node[-1]
        else:
            return None


def find_duplicate_key(raw: bytes) -> str | None:
    """The path of the first duplicated key in JSON text ``raw``, or None; the 400 of a
    body nested too deeply for the check (200 levels) or one jiter cannot read."""
    try:
        jiter.from_json(raw, catch_duplicate_keys=True, cache_mode="keys")
    except ValueError as exc:
        message = str(exc)
        found = _DUPLICATE.fullmatch(message)
        if found is None:
            if message.startswith("recursion limit"):
                raise InvalidRequest(_TOO_DEEP, code="invalid_json") from None
            # orjson read it and jiter cannot: two parsers that disagree on a body
            # are what this check refuses.
            raise InvalidRequest(
                f"We could not parse the JSON body of your request: {message}.",
                code="invalid_json",
            ) from None
        key, line, column = found.group(1), int(found.group(2)), int(found.group(3))
        path = _path_at(raw, _offset(raw, line, column))
        return path if path is not None else key
    return None


def check_duplicate_keys(raw: bytes, parsed: Any) -> None:
    """InvalidRequest if JSON text ``raw`` (parsed by orjson as ``parsed``) repeats a key
    in any object, or nests too deeply to be forwarded."""
    try:
        written = orjson.dumps(parsed)
    except orjson.JSONEncodeError:
        raise InvalidRequest(_TOO_DEEP, code="invalid_json") from None
    # The escape looked for only in a body with a backslash: ``in`` with one byte is
    # a memchr that stops at the first, where the five-byte search reads the whole
    # body at a third of memchr's speed.
    if (b"\\" not in raw or _ESCAPE_3X not in raw) and raw.count(b":") == written.count(b":"):
        return
    path = find_duplicate_key(raw)
    if path is not None:
        raise InvalidRequest(
            f"The JSON body of your request repeats the key '{path}'; each key may appear "
            "only once in an object.",
            param=path,
            code="duplicate_key",
        )
