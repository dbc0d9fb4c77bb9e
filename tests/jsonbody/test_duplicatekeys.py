"""Duplicate JSON keys: found by the colon count, named by the slow walk."""

from __future__ import annotations

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.jsonbody.duplicatekeys import check_duplicate_keys, find_duplicate_key


def check(raw: bytes) -> None:
    check_duplicate_keys(raw, orjson.loads(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": 2}',
        b'{"a": "x:y", "b": {"c": ":"}, "d": [":", {"e": 1}]}',
        b'{"a": 1, "b": {"a": 1}}',  # the same name at another level is no duplicate
        b'{"\\u003a": 1, "b": "\\u003A"}',  # escaped colons: slow path, no duplicate
        b'{"a": "\\":\\""}',
        b"{}",
    ],
)
def test_unambiguous_bodies_pass(raw: bytes) -> None:
    check(raw)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b'{"n": 3, "n": 1}', "n"),
        (b'{"response_format": {"type": "json_object", "type": "text"}}', "response_format.type"),
        (
            b'{"messages": [{"role": "user"}, {"role": "user", "role": "system"}]}',
            "messages[1].role",
        ),
        (b'{"a": "\\u003a", "b": 1, "b": 2}', "b"),  # an escaped colon cannot hide one
        (b'{"a": 1, "\\u0061": 2}', "a"),  # the same key, spelled with an escape
        (b'{"a": "one\\ntwo", "b": 1, "b": 2}', "b"),  # a backslash, no \u003 escape
        (b'{"a": "\\\\", "b": "\\u003a", "b": 2}', "b"),  # both, the escape after
    ],
)
def test_duplicates_are_refused_naming_the_key(raw: bytes, path: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check(raw)
    assert caught.value.param == path
    assert caught.value.code == "duplicate_key"
    assert find_duplicate_key(raw) == path


def test_too_deep_to_forward_is_a_400() -> None:
    raw = b'{"a": ' + b"[" * 600 + b"]" * 600 + b"}"
    with pytest.raises(InvalidRequest) as caught:
        check(raw)
    assert caught.value.status == 400 and "nested too deeply" in caught.value.message
