"""The duplicate-key check costs what a parse costs, whatever a hostile body holds.

A body of many small objects with one duplicate key, or with one ``\\u003a`` escape,
took the check down a path that ran Python once per object (issue 33, item 4: over
2 s per request for a few MB, on the event loop). Counted in Python calls and
bytecodes (bench/callcounter.py's Counter), not in time: the count must not grow with
the number of objects.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.callcounter import Counter
from gateway.errors import InvalidRequest
from gateway.jsonbody.duplicatekeys import check_duplicate_keys, find_duplicate_key

SMALL = b'{"role":"user","content":"x"}'


def _body(objects: int, tail: bytes) -> bytes:
    return b'{"model":"m","messages":[' + b",".join([SMALL] * objects) + b"]" + tail + b"}"


def _counted(raw: bytes) -> tuple[int, int, str | None]:
    """(Python calls, bytecodes) of one check of ``raw``, and the key it refused."""
    parsed = orjson.loads(raw)
    counter = Counter("")
    refused = None
    tracer = sys.gettrace()
    # No collection inside: one would run the finalizers of other tests' garbage
    # (transports, generators), whose Python calls are not the check's.
    gc.collect()
    gc.disable()
    sys.setprofile(counter.profile)
    sys.settrace(counter.trace)
    try:
        check_duplicate_keys(raw, parsed)
    except InvalidRequest as exc:
        refused = exc.param
    finally:
        sys.settrace(tracer)
        sys.setprofile(None)
        gc.enable()
    return counter.python, counter.opcodes, refused


@pytest.mark.parametrize(
    ("tail", "refused"),
    [
        (b',"n":1,"n":2', "n"),  # one duplicate, after every object
        (b',"s":"\\u003a"', None),  # one escaped colon, no duplicate
        (b',"s":"\\u003a","s":1', "s"),
        (b',"x":{"a":[{"b":1,"b":2}]}', "x.a[0].b"),
    ],
)
def test_the_check_does_not_grow_with_the_objects_of_the_body(
    tail: bytes, refused: str | None
) -> None:
    small = _counted(_body(100, tail))
    large = _counted(_body(20_000, tail))
    assert small[2] == large[2] == refused
    # The same Python work for 200 times the objects: it is all in the parsers.
    assert large[0] == small[0] and large[1] == small[1]
    assert large[0] < 100


def test_a_duplicate_in_the_middle_of_a_long_array_is_named_by_its_index() -> None:
    objects = [SMALL] * 5000
    objects[3210] = b'{"role":"user","role":"system"}'
    raw = b'{"messages":[' + b",".join(objects) + b"]}"
    assert _counted(raw)[2] == "messages[3210].role"


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        # Where jiter's position falls: line breaks (CRLF too), spaces around the colon,
        # multi-byte text before it, escapes in the key, an earlier value a container.
        (b'{"x":[1,\n2],\n"k":{"q":1,\n  "q"\n:\n3}}', "k.q"),
        (b'{"a":1,\r\n"a":2}', "a"),
        (b'{"n" : 1, "n"  :  2}', "n"),
        ('{"é": "ü", "k": {"ö": 1, "ö": 2}}'.encode(), "k.ö"),
        (b'{"a\\"b":1,"a\\"b":2}', 'a"b'),
        (b'{"a": 1, "\\u0061": 2}', "a"),
        (b'{"n": {"deep": [1]}, "m": 1, "n": 2}', "n"),
        (b'{"a": [[[{"z": 0}], {"y": 1, "y": 2}]]}', "a[0][1].y"),
        # A value equal to anything the body could guess is no marker.
        (b'{"n": "dup", "a": {"n": "dup", "n": 1}}', "a.n"),
    ],
)
def test_the_duplicate_is_named_by_its_path(raw: bytes, path: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_duplicate_keys(raw, orjson.loads(raw))
    assert caught.value.param == path
    assert caught.value.code == "duplicate_key"


def test_a_body_too_deep_for_the_second_parser_is_refused_as_too_deep() -> None:
    # 230 levels: orjson writes it again (its limit is 254), jiter's check stops at 200.
    raw = b'{"s": "\\u003a", "a": ' + b"[" * 230 + b"]" * 230 + b"}"
    with pytest.raises(InvalidRequest) as caught:
        check_duplicate_keys(raw, orjson.loads(raw))
    assert caught.value.code == "invalid_json" and "nested too deeply" in caught.value.message


class _Pairs(list[tuple[str, Any]]):
    """An object's members in order, duplicates kept (the reference reading)."""


def _reference(value: Any, path: str = "") -> str | None:
    # The stdlib's parser, keeping every member: slow, plainly right.
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, member in value:
            where = f"{path}.{key}" if path else key
            if key in seen:
                return where
            seen.add(key)
            found = _reference(member, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _reference(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


_KEYS = st.sampled_from(["a", "b", ":", "a:b", 'q"', "\\", "é", "x.y", ""])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", ":", "x"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(st.tuples(_KEYS, inner), max_size=4).map(_Pairs)
    ),
    max_leaves=12,
)


def _text(value: Any, escape: bool) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(f"{_text(k, escape)}:{_text(v, escape)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v, escape) for v in value) + "]"
    text = json.dumps(value)
    return text.replace(":", "\\u003a") if escape and isinstance(value, str) else text


@given(st.lists(st.tuples(_KEYS, _JSON), max_size=4).map(_Pairs), st.booleans())
def test_the_path_is_the_reference_readings(body: _Pairs, escape: bool) -> None:
    raw = _text(body, escape).encode()
    assert find_duplicate_key(raw) == _reference(json.loads(raw, object_pairs_hook=_Pairs))
