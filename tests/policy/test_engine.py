"""Table-driven tests of the pure policy engine against the default ft-serve policy."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.policy.engine import Decision, Policy, apply_policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from tests.support.bodies import CHAT, COMPLETIONS, MESSAGES, MODEL, chat
from tests.support.paths import POLICY


@pytest.fixture(scope="module")
def policy() -> Policy:
    source, digest = load_policy_file(POLICY)
    return Policy(source, digest=digest)


def comp(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "Once upon a time", **fields}


# (request fields, param the 400 names, its code)
REJECTED: list[tuple[dict[str, Any], str, str]] = [
    ({"logprobs": True}, "logprobs", "unsupported_parameter"),
    ({"logprobs": True, "top_logprobs": 3}, "logprobs", "unsupported_parameter"),
    ({"top_logprobs": 3}, "top_logprobs", "unsupported_parameter"),
    ({"logit_bias": {"1234": 5}}, "logit_bias", "unsupported_value"),
    # n is served by fan-out (below) up to the policy's maximum, 8.
    ({"n": 9}, "n", "integer_above_max_value"),
    ({"n": 0}, "n", "integer_below_min_value"),
    ({"n": True}, "n", "invalid_type"),
    ({"n": 1.5}, "n", "invalid_type"),
    ({"n": "3"}, "n", "invalid_type"),
    ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_value"),
    (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
        "response_format",
        "unsupported_value",
    ),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "unsupported_value"),
    ({"reasoning_effort": "high"}, "reasoning_effort", "unsupported_parameter"),
    ({"temperature": 3}, "temperature", "decimal_above_max_value"),
    ({"temperature": 2.5}, "temperature", "decimal_above_max_value"),
    ({"temperature": -0.1}, "temperature", "decimal_below_min_value"),
    ({"temperature": "hot"}, "temperature", "invalid_type"),
    ({"top_p": 1.5}, "top_p", "decimal_above_max_value"),
    ({"max_tokens": 0}, "max_tokens", "integer_below_min_value"),
    ({"max_tokens": True}, "max_tokens", "invalid_type"),
    ({"max_tokens": 1.5}, "max_tokens", "invalid_type"),
    ({"max_tokens": "42"}, "max_tokens", "invalid_type"),
    ({"seed": True}, "seed", "invalid_type"),
    ({"seed": 1.5}, "seed", "invalid_type"),
    ({"seed": "42"}, "seed", "invalid_type"),
    ({"seed": 2**63}, "seed", "integer_above_max_value"),
    ({"seed": -(2**63) - 1}, "seed", "integer_below_min_value"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "array_above_max_length"),
    ({"stop": [1]}, "stop[0]", "invalid_type"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "invalid_value"),
    (
        {"stream": False, "stream_options": {"include_usage": True}},
        "stream_options",
        "invalid_value",
    ),
    ({"stream": "yes"}, "stream", "invalid_type"),
    ({"logit_bias": {"1": 500}}, "logit_bias.1", "integer_above_max_value"),
    ({"best_new_field": 1}, "best_new_field", "unknown_parameter"),
    ({"max_completion_tokens": 5, "max_tokens": 5}, "max_completion_tokens", "invalid_value"),
    ({"messages": []}, "messages", "empty_array"),
    ({"messages": None}, "messages", "missing_required_parameter"),
    ({"model": 5}, "model", "invalid_type"),
]


@pytest.mark.parametrize(("fields", "param", "code"), REJECTED)
def test_chat_rejections_name_the_field(
    policy: Policy, fields: dict[str, Any], param: str, code: str
) -> None:
    decision = apply_policy(policy, CHAT, chat(**fields))
    assert decision.error is not None
    assert decision.error.param == param
    assert decision.error.code == code
    assert decision.error.status == 400
    assert f"'{param}'" in decision.error.message


# Neutral values mean "not asked for": what client libraries send by default.
NEUTRAL = [
    {"n": 1},
    {"n": None},
    {"logprobs": False},
    {"logprobs": None},
    {"top_logprobs": None},
    {"logit_bias": {}},
    {"logit_bias": None},
    {"response_format": {"type": "text"}},
    {"response_format": None},
    {"tools": []},
    {"tool_choice": "none"},
    {"parallel_tool_calls": True},
    {"modalities": ["text"]},
    {"seed": None},
    {"temperature": None},
    # LangChain's ChatOpenAI with usage streaming on
    {"stream": True, "stream_options": {"include_usage": True}},
    {"stream": False},
    {"stream_options": None},
]


def passes_unchanged(policy: Policy, fields: dict[str, Any]) -> Decision:
    """The decision on a chat request with ``fields``, checked to forward it as it came:
    the very same body."""
    body = chat(**fields)
    decision = apply_policy(policy, CHAT, body)
    assert decision.error is None
    assert decision.changed is False
    assert decision.body is body
    return decision


@pytest.mark.parametrize("fields", NEUTRAL)
def test_chat_neutral_values_pass_unchanged(policy: Policy, fields: dict[str, Any]) -> None:
    passes_unchanged(policy, fields)


PASSED = [
    {"seed": 1234},
    {"seed": -1},
    {"seed": 2**63 - 1},
    {"seed": -(2**63)},
    {"temperature": 0},
    {"temperature": 2},
    {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "min_p": 0.05},
    {"presence_penalty": -2, "frequency_penalty": 2, "repetition_penalty": 1.1},
    {"stop": "\n"},
    {"stop": ["a", "b", "c", "d"]},
    {"max_tokens": 20},
    {"chat_template_kwargs": {"enable_thinking": False}},
]


@pytest.mark.parametrize("fields", PASSED)
def test_chat_supported_fields_pass_unchanged(policy: Policy, fields: dict[str, Any]) -> None:
    decision = passes_unchanged(policy, fields)
    assert decision.body.get("seed") == fields.get("seed")


# (route, request fields): n > 1 is served by fan-out, on both routes.
FANOUT = [
    (CHAT, {"n": 2}),
    (CHAT, {"n": 8}),
    (CHAT, {"n": 3, "seed": 1234, "stream": True, "stream_options": {"include_usage": True}}),
    (COMPLETIONS, {"n": 3}),
    (COMPLETIONS, {"n": 8, "seed": -1}),
]


@pytest.mark.parametrize(("route", "fields"), FANOUT)
def test_n_above_one_is_a_fanout_without_n(
    policy: Policy, route: str, fields: dict[str, Any]
) -> None:
    body = chat(**fields) if route == CHAT else comp(**fields)
    decision = apply_policy(policy, route, body)
    assert decision.error is None
    assert decision.fanout == fields["n"]
    assert decision.changed
    assert decision.body == {k: v for k, v in body.items() if k != "n"}  # the seed too
    assert "n" in body  # the client's body is left as it came
    assert [(o.field, o.action, o.detail) for o in decision.outcomes] == [
        ("n", "fanout", f"{fields['n']} requests")
    ]


@pytest.mark.parametrize("n", [1, None])
def test_n_one_or_null_is_no_fanout(policy: Policy, n: int | None) -> None:
    for route, body in ((CHAT, chat(n=n)), (COMPLETIONS, comp(n=n))):
        decision = apply_policy(policy, route, body)
        assert decision.fanout == 1
        assert decision.body is body and not decision.changed


def test_rename_max_completion_tokens(policy: Policy) -> None:
    decision = apply_policy(policy, CHAT, chat(max_completion_tokens=7))
    assert decision.error is None and decision.changed
    assert decision.body["max_tokens"] == 7
    assert "max_completion_tokens" not in decision.body
    assert [(o.field, o.action) for o in decision.outcomes] == [
        ("max_completion_tokens", "renamed")
    ]


def test_strip_bookkeeping_fields(policy: Policy) -> None:
    decision = apply_policy(policy, CHAT, chat(user="u-1", metadata={"a": "b"}))
    assert decision.error is None and decision.changed
    assert "user" not in decision.body and "metadata" not in decision.body
    assert {o.field for o in decision.outcomes if o.action == "stripped"} == {"user", "metadata"}


def test_langchain_completions_defaults_pass(policy: Policy) -> None:
    # LangChain's completions model sends all of these on every call.
    body = comp(
        temperature=0.7,
        top_p=1,
        frequency_penalty=0,
        presence_penalty=0,
        n=1,
        max_tokens=256,
        seed=None,
        logprobs=None,
    )
    decision = apply_policy(policy, COMPLETIONS, body)
    assert decision.error is None
    assert decision.body is body


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"logprobs": 0}, "logprobs"),  # 0 still returns the chosen token's logprob
        ({"logprobs": 5}, "logprobs"),
        ({"n": 9}, "n"),  # above the fan-out's maximum
        ({"n": 0}, "n"),
        ({"best_of": 2}, "best_of"),
        ({"echo": True}, "echo"),
        ({"suffix": "end"}, "suffix"),
        ({"prompt": None}, "prompt"),
        ({"messages": MESSAGES}, "messages"),  # a chat field on the completions route is unknown
    ],
)
def test_completions_rejections(policy: Policy, fields: dict[str, Any], param: str) -> None:
    decision = apply_policy(policy, COMPLETIONS, comp(**fields))
    assert decision.error is not None and decision.error.param == param


def test_missing_required_fields(policy: Policy) -> None:
    decision = apply_policy(policy, CHAT, {"model": "m"})
    assert decision.error is not None
    assert decision.error.param == "messages"
    assert decision.error.code == "missing_required_parameter"


@pytest.mark.parametrize(("n", "action"), [(1, "passed"), (3, "fanout")])
def test_explain_trace_lists_every_field(policy: Policy, n: int, action: str) -> None:
    decision = apply_policy(policy, CHAT, chat(seed=1, n=n, user="x"), trace=True)
    actions = {o.field: o.action for o in decision.outcomes}
    assert actions == {
        "model": "passed",
        "messages": "passed",
        "messages[0].role": "passed",
        "messages[0].content": "passed",
        "seed": "passed",
        "n": action,
        "user": "stripped",
    }


def test_unknown_route_is_left_alone(policy: Policy) -> None:
    body = {"anything": 1}
    decision = apply_policy(policy, "/v1/audio/speech", body)
    assert decision.error is None and decision.body is body


OVERLAYS = """
version: 1
unknown_fields: strip
routes:
  /v1/chat/completions:
    fields:
      model: {action: pass, type: string, required: true}
      n: {action: reject, type: integer, minimum: 1, maximum: 128, neutral: [1]}
      logprobs: {action: reject, type: boolean, neutral: [false], drop_neutral: true}
      temperature: {action: default, type: number, minimum: 0, maximum: 2, value: 0.7}
models:
  big-model:
    routes:
      /v1/chat/completions:
        fields:
          logprobs: {action: pass}
profiles:
  batch:
    routes:
      /v1/chat/completions:
        unknown_fields: reject
        fields:
          n: {action: pass, maximum: 4}
"""


@pytest.fixture(scope="module")
def overlay_policy() -> Policy:
    return Policy(parse_policy_text(OVERLAYS))


@pytest.mark.parametrize(
    ("body", "profile", "error_param", "expected_body"),
    [
        # unknown fields are stripped by the policy-wide rule
        ({"model": "m", "foo": 1}, None, None, {"model": "m", "temperature": 0.7}),
        # default only when absent; checked when present
        ({"model": "m", "temperature": 1.5}, None, None, {"model": "m", "temperature": 1.5}),
        ({"model": "m", "temperature": 5}, None, "temperature", None),
        # drop_neutral removes the neutral value
        ({"model": "m", "logprobs": False}, None, None, {"model": "m", "temperature": 0.7}),
        ({"model": "m", "logprobs": True}, None, "logprobs", None),
        # per-model overlay keeps the base type check but passes the field
        (
            {"model": "big-model", "logprobs": True},
            None,
            None,
            {"model": "big-model", "logprobs": True, "temperature": 0.7},
        ),
        ({"model": "big-model", "logprobs": 3}, None, "logprobs", None),
        # a profile (chosen by API key) lifts n to 4 and turns unknown fields into 400s
        ({"model": "m", "n": 4}, "batch", None, {"model": "m", "n": 4, "temperature": 0.7}),
        ({"model": "m", "n": 5}, "batch", "n", None),
        ({"model": "m", "n": 2}, None, "n", None),
        ({"model": "m", "foo": 1}, "batch", "foo", None),
    ],
)
def test_overlays_defaults_and_unknown_rule(
    overlay_policy: Policy,
    body: dict[str, Any],
    profile: str | None,
    error_param: str | None,
    expected_body: dict[str, Any] | None,
) -> None:
    decision = apply_policy(overlay_policy, CHAT, body, profile=profile)
    if error_param is None:
        assert decision.error is None
        assert decision.body == expected_body
    else:
        assert decision.error is not None and decision.error.param == error_param


def test_strict_json_equality_for_neutral_values(overlay_policy: Policy) -> None:
    # true == 1 and 1 == 1.0 in Python, not in JSON: n: true is not the neutral n: 1.
    assert apply_policy(overlay_policy, CHAT, {"model": "m", "n": True}).error is not None
    assert apply_policy(overlay_policy, CHAT, {"model": "m", "n": 1.0}).error is not None
    assert apply_policy(overlay_policy, CHAT, {"model": "m", "n": 1}).error is None
