"""Hypothesis strategies and checks shared by the fuzz tests.

``FT_FUZZ_EXAMPLES`` scales every fuzz test (``scripts/fuzz`` sets it high);
without it the counts are CI-sized and the examples derandomised, so CI sees
the same inputs every run and a failure there is reproducible.
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gateway.errors import InvalidRequest
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.file import FieldRule
from gateway.policy.loading import load_policy_file
from tests.support.paths import POLICY as DEFAULT_POLICY

_SCALE = os.environ.get("FT_FUZZ_EXAMPLES")


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` in CI; ``FT_FUZZ_EXAMPLES`` (random, not derandomised) when set."""
    return settings(
        max_examples=int(_SCALE) if _SCALE else ci_examples,
        derandomize=not _SCALE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def load_default_policy() -> Policy:
    source, digest = load_policy_file(DEFAULT_POLICY)
    return Policy(source, digest=digest)


POLICY = load_default_policy()
ROUTES = ("/v1/chat/completions", "/v1/completions")
FIELD_NAMES = sorted({name for r in ROUTES for name in POLICY.source.routes[r].fields})
REQUIRED = {name for r in ROUTES for name in (POLICY.route(r).required if POLICY.route(r) else ())}  # type: ignore[union-attr]
# Error codes that a field causes: these must name it in ``param``.
FIELD_CODES = {
    "invalid_type",
    "invalid_value",
    "unsupported_parameter",
    "unsupported_value",
    "unknown_parameter",
    "missing_required_parameter",
    "integer_above_max_value",
    "integer_below_min_value",
    "decimal_above_max_value",
    "decimal_below_min_value",
    "empty_array",
    "array_below_min_length",
    "array_above_max_length",
    "duplicate_key",
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from([0, 1, -1, 2, 3, 4, 5, 20, 21, 100, 101, 128, 129, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 2.0000001, -2.5, 1e308]),
    st.text(max_size=20),
    st.sampled_from(["text", "json_object", "none", "auto", "user", "", "stop", ":", '"']),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.sampled_from(["type", "role", "content"])),
            children,
            max_size=5,
        ),
    ),
    max_leaves=10,
)
# Inside messages: the roles and part types the default policy names, a few it
# does not, and the keys of each, mostly well-formed so that the walk goes deep.
ROLES = ["system", "developer", "user", "assistant", "tool", "function", "wizard", ""]
PART_TYPES = ["text", "image_url", "input_audio", "file", "refusal", "video"]
part_values = {
    "text": st.text(max_size=10),
    "image_url": st.fixed_dictionaries({"url": st.text(max_size=10)}),
    "input_audio": st.fixed_dictionaries({"data": st.text(max_size=5), "format": st.just("wav")}),
    "file": st.fixed_dictionaries({"file_id": st.text(max_size=5)}),
    "refusal": st.text(max_size=10),
    "video": json_values,
}


@st.composite
def content_parts(draw: st.DrawFn) -> Any:
    """A content part: usually ``{"type": T, T: value}``, sometimes anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    kind = draw(st.sampled_from(PART_TYPES))
    part: dict[str, Any] = {"type": kind, kind: draw(part_values[kind])}
    if draw(st.integers(0, 9)) == 0:
        part.update(draw(st.dictionaries(st.sampled_from(["type", "x", kind]), json_values)))
    return part


tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(max_size=5),
            "type": st.sampled_from(["function", "other"]),
            "function": st.fixed_dictionaries(
                {
                    "name": st.text(max_size=5),
                    "arguments": st.one_of(st.text(max_size=5), json_values),
                }
            ),
        }
    ),
    max_size=2,
)


@st.composite
def chat_messages(draw: st.DrawFn) -> dict[str, Any]:
    """One message: a role (mostly a known one) and keys a client might send."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.dictionaries(st.sampled_from(["role", "content", "x"]), json_values))
    message: dict[str, Any] = {"role": draw(st.sampled_from(ROLES[:4] * 3 + ROLES[4:]))}
    roll = draw(st.integers(0, 9))
    if roll < 5:
        message["content"] = draw(st.text(max_size=20))
    elif roll < 9:
        message["content"] = draw(st.lists(content_parts(), max_size=3))
    extras = {
        "name": st.text(max_size=5),
        "tool_calls": tool_calls,
        "tool_call_id": st.text(max_size=5),
        "refusal": st.text(max_size=5),
        "audio": json_values,
        "colour": json_values,
    }
    for key in draw(st.lists(st.sampled_from(sorted(extras)), max_size=2, unique=True)):
        message[key] = draw(extras[key])
    return message


messages = st.lists(chat_messages(), min_size=1, max_size=4)
field_names = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=12))


def plausible(rule: FieldRule) -> st.SearchStrategy[Any]:
    """Values a client might send for a field: neutral ones, ones in range, any."""
    kinds = rule.type if isinstance(rule.type, list) else [rule.type]
    options: list[st.SearchStrategy[Any]] = []
    if rule.neutral:
        options.append(st.sampled_from(rule.neutral))
    low = rule.minimum if rule.minimum is not None else -1000
    high = rule.maximum if rule.maximum is not None else 1000
    for kind in kinds:
        if kind == "integer":
            options.append(st.integers(int(low), int(high)))
        elif kind == "number":
            options.append(st.floats(float(low), float(high)))
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "string":
            options.append(st.text(max_size=10))
        elif kind == "array":
            options.append(st.lists(st.text(max_size=5), max_size=5))
        elif kind == "object":
            options.append(st.dictionaries(st.text(max_size=5), st.integers(-100, 100), max_size=2))
    # Mostly plausible values, so that many requests get through to the engine.
    return st.one_of(*options, *options, *options, st.none(), json_values)


@st.composite
def request_bodies(draw: st.DrawFn, route: str | None = None) -> dict[str, Any]:
    """Bodies near the policy's edges: often valid at the core, any value anywhere."""
    route = route or draw(st.sampled_from(ROUTES))
    rules = POLICY.source.routes[route].fields
    body: dict[str, Any] = {}
    roll = draw(st.integers(0, 19))
    if roll:
        body["model"] = "m" if roll > 2 else draw(json_values)
    core = "messages" if route == "/v1/chat/completions" else "prompt"
    roll = draw(st.integers(0, 19))
    if roll:
        good = messages if core == "messages" else st.text(max_size=20)
        body[core] = draw(good if roll > 2 else json_values)
    for name in draw(st.lists(st.sampled_from(sorted(rules)), max_size=4, unique=True)):
        body[name] = draw(plausible(rules[name]))
    if draw(st.integers(0, 4)) == 0:
        body.update(draw(st.dictionaries(field_names, json_values, max_size=2)))
    return body


SPECIAL_NUMBERS = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e400",
    b"123456789012345678901234567890",
    b"18446744073709551616",
    b"-0",
    b"1E2",
    b"0.1e-400",
]
SPECIAL_STRINGS = [
    b'"\\ud800"',
    b'"\\udfff"',
    b'"a\\ud800b"',
    b'"\\u0000"',
    b'"\xed\xa0\x80"',
    b'"\xff"',
]


def _encode(value: Any, draw: st.DrawFn, odd: bool) -> bytes:
    """JSON text for ``value``; when ``odd``, with duplicate keys and invalid literals."""
    if isinstance(value, dict):
        members = [orjson.dumps(k) + b":" + _encode(v, draw, odd) for k, v in value.items()]
        if odd and value and draw(st.integers(0, 3)) == 0:  # repeat a key, another value
            key = draw(st.sampled_from(list(value)))
            again = orjson.dumps(key) + b":" + _encode(draw(json_values), draw, odd)
            members.insert(draw(st.integers(0, len(members))), again)
        sep = draw(st.sampled_from([b",", b", ", b" ,\n"]))
        return b"{" + sep.join(members) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(_encode(v, draw, odd) for v in value) + b"]"
    if odd and draw(st.integers(0, 4)) == 0:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return draw(st.sampled_from(SPECIAL_NUMBERS))
        if isinstance(value, str):
            return draw(st.sampled_from(SPECIAL_STRINGS))
    return orjson.dumps(value)


@st.composite
def raw_bodies(draw: st.DrawFn, route: str | None = None) -> bytes:
    """Request body bytes: valid JSON, JSON with oddities, or byte soup."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=64))
    bodies = request_bodies(route)
    value = draw(st.one_of(bodies, json_values)) if kind == 1 else draw(bodies)
    raw = _encode(value, draw, odd=draw(st.integers(0, 3)) == 0)
    if draw(st.integers(0, 19)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]  # cut short
    return raw


content_types = st.one_of(
    st.sampled_from(["application/json", None]),
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "APPLICATION/JSON",
            "application/vnd.api+json",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            None,
        ]
    ),
)


def check_error_shape(status: int, payload: Any, body: Any) -> None:
    """A 4xx is OpenAI-shaped; a field's error names the field in ``param``."""
    assert 400 <= status < 500, (status, payload)
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] is None or isinstance(error["code"], str)
    if error["code"] in FIELD_CODES:
        param = error["param"]
        assert isinstance(param, str), error
        # The path names what is in the request; a missing key's parent is. (A
        # duplicate key is named as the raw text has it: the parsed body kept one.)
        missing = error["code"] == "missing_required_parameter"
        if error["code"] != "duplicate_key":
            assert path_exists(body, param, missing=missing), (param, body)


def path_exists(node: Any, path: str, *, missing: bool = False) -> bool:
    """Whether ``path`` (``messages[2].content[1].type``) leads to a value inside
    ``node`` (with ``missing``: or to an object that lacks the last key). Keys may
    hold dots and brackets themselves, so every key that the path starts with is tried."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str) or not path.startswith(key):
                continue
            rest = path[len(key) :]
            if not rest:
                return True
            if rest[0] == ".":
                rest = rest[1:]
            elif rest[0] != "[":
                continue
            if path_exists(value, rest, missing=missing):
                return True
        return missing and "." not in path and "[" not in path
    if isinstance(node, list):
        match = re.match(r"\[(\d+)\]\.?", path)
        if match is None or int(match.group(1)) >= len(node):
            return False
        rest = path[match.end() :]
        return not rest or path_exists(node[int(match.group(1))], rest, missing=missing)
    return False


def check_forwardable(route: str, forwarded: bytes) -> None:
    """What reached the engine parses, has no duplicate keys, and passes the policy unchanged."""
    body = orjson.loads(forwarded)
    from gateway.jsonbody.duplicatekeys import check_duplicate_keys

    check_duplicate_keys(forwarded, body)
    decision = apply_policy(POLICY, route, body)
    assert decision.error is None, decision.error
    assert not decision.changed, body


def is_invalid_request(exc: object) -> bool:
    return isinstance(exc, InvalidRequest) and exc.status == 400
