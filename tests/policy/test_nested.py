"""Rules inside values: messages by role, content parts by type, tools, tool calls.

Tables against the default ft-serve policy (what it accepts inside messages),
then against small policies for each action a nested rule can take.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.policy.engine import Decision, Policy, apply_policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from tests.support.bodies import CHAT, chat
from tests.support.paths import POLICY


@pytest.fixture(scope="module")
def policy() -> Policy:
    source, digest = load_policy_file(POLICY)
    return Policy(source, digest=digest)


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


TEXT = {"type": "text", "text": "What is in this picture?"}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_data": "JVBERi0=", "filename": "a.pdf"}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

# Messages the default policy forwards unchanged.
ACCEPTED = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}],
    [user(TEXT), user(TEXT, TEXT)],
    [{"role": "user", "content": "hi", "name": "alice"}],
    [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "more"},
    ],
    [{"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}],
    [{"role": "assistant", "content": None, "refusal": "I cannot help with that."}],
    [{"role": "assistant", "content": "x", "tool_calls": []}],
]


@pytest.mark.parametrize("messages", ACCEPTED)
def test_accepted_messages_are_forwarded_unchanged(policy: Policy, messages: Any) -> None:
    body = chat(messages=messages)
    decision = apply_policy(policy, CHAT, body)
    assert decision.error is None
    assert decision.changed is False and decision.body is body


# (messages, the param the 400 names, its code, words the message holds)
REJECTED: list[tuple[Any, str, str, str]] = [
    (
        [{"role": "wizard", "content": "hi"}],
        "messages[0].role",
        "invalid_value",
        "Invalid value: 'wizard'. Supported values are: 'system', 'developer', 'user', "
        "and 'assistant'.",
    ),
    ([{"content": "hi"}], "messages[0].role", "missing_required_parameter", "'messages[0].role'"),
    ([{"role": 3, "content": "hi"}], "messages[0].role", "invalid_type", "expected a string"),
    (
        [{"role": "user", "content": "hi"}, user(TEXT, IMAGE)],
        "messages[1].content[1].type",
        "unsupported_value",
        "does not support 'image_url' on this deployment. Supported values are: 'text'. "
        "This engine serves a text-only model",
    ),
    ([user(AUDIO)], "messages[0].content[0].type", "unsupported_value", "'input_audio'"),
    ([user(FILE)], "messages[0].content[0].type", "unsupported_value", "'file'"),
    (
        [user({"type": "video", "video": {}})],
        "messages[0].content[0].type",
        "invalid_value",
        "Invalid value: 'video'. Supported values are: 'text'.",
    ),
    (
        [{"role": "system", "content": [IMAGE]}],
        "messages[0].content[0].type",
        "invalid_value",
        "This message takes text parts only.",
    ),
    ([user({"type": "text"})], "messages[0].content[0].text", "missing_required_parameter", ""),
    ([user({"type": "text", "text": 5})], "messages[0].content[0].text", "invalid_type", ""),
    ([user({"text": "hi"})], "messages[0].content[0].type", "missing_required_parameter", ""),
    ([{"role": "user"}], "messages[0].content", "missing_required_parameter", ""),
    ([{"role": "user", "content": 5}], "messages[0].content", "invalid_type", ""),
    ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]", "invalid_type", ""),
    (
        [{"role": "user", "content": "hi", "colour": "red"}],
        "messages[0].colour",
        "unknown_parameter",
        "Unknown parameter: 'messages[0].colour'.",
    ),
    ([{"role": "user", "content": "hi", "name": 7}], "messages[0].name", "invalid_type", ""),
    (
        [{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
        "messages[0].role",
        "unsupported_value",
        "does not support 'tool'",
    ),
    (
        [{"role": "assistant", "content": None, "tool_calls": [CALL]}],
        "messages[0].tool_calls",
        "unsupported_value",
        "Tool calling is not supported",
    ),
    (
        [{"role": "function", "name": "f", "content": "x"}],
        "messages[0].role",
        "unsupported_value",
        "deprecated",
    ),
    (
        [{"role": "assistant", "audio": {"id": "a1"}}],
        "messages[0].audio",
        "unsupported_parameter",
        "Audio",
    ),
    (["hi"], "messages[0]", "invalid_type", ""),
]


@pytest.mark.parametrize(("messages", "param", "code", "words"), REJECTED)
def test_rejections_name_the_exact_path(
    policy: Policy, messages: Any, param: str, code: str, words: str
) -> None:
    decision = apply_policy(policy, CHAT, chat(messages=messages))
    assert decision.error is not None
    assert (decision.error.param, decision.error.code) == (param, code)
    assert decision.error.status == 400 and decision.error.type == "invalid_request_error"
    assert words in decision.error.message


def test_the_developer_role_is_forwarded_as_system(policy: Policy) -> None:
    messages = [
        {"role": "developer", "content": "Be brief.", "name": "ops"},
        {"role": "user", "content": "hi"},
    ]
    body = chat(messages=messages)
    decision = apply_policy(policy, CHAT, body)
    assert decision.error is None and decision.changed
    assert decision.body["messages"] == [
        {"role": "system", "content": "Be brief.", "name": "ops"},
        {"role": "user", "content": "hi"},
    ]
    assert body["messages"][0]["role"] == "developer"  # the client's body is not modified
    renamed = [(o.field, o.action, o.detail) for o in decision.outcomes]
    assert renamed == [("messages[0].role", "renamed", "'developer' to 'system'")]


def test_a_developer_message_still_takes_text_parts_only(policy: Policy) -> None:
    decision = apply_policy(
        policy, CHAT, chat(messages=[{"role": "developer", "content": [IMAGE]}])
    )
    assert decision.error is not None and decision.error.param == "messages[0].content[0].type"


def test_the_first_problem_answers_and_every_one_is_recorded(policy: Policy) -> None:
    messages = [{"role": "wizard", "content": "x"}, user(IMAGE)]
    decision = apply_policy(policy, CHAT, chat(messages=messages, logprobs=True))
    assert decision.error is not None and decision.error.param == "messages[0].role"
    rejected = [o.field for o in decision.outcomes if o.action == "rejected"]
    assert rejected == ["messages[0].role", "messages[1].content[0].type", "logprobs"]


def test_explain_traces_each_nested_decision(policy: Policy) -> None:
    messages = [{"role": "developer", "content": "Be brief."}, user(TEXT)]
    decision = apply_policy(policy, CHAT, chat(messages=messages), trace=True)
    traced = {o.field: o.action for o in decision.outcomes}
    assert traced["messages"] == "passed"
    assert traced["messages[0].role"] == "renamed"
    assert traced["messages[0].content"] == "passed"
    assert traced["messages[1].role"] == "passed"
    assert traced["messages[1].content[0].type"] == "passed"
    assert traced["messages[1].content[0].text"] == "passed"


def test_nested_checks_grow_linearly_not_by_copying(policy: Policy) -> None:
    # 500 messages, nothing changed: the same body object comes back.
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(500)]
    body = chat(messages=messages)
    decision = apply_policy(policy, CHAT, body)
    assert decision.error is None and decision.body is body


# Tools, as the default policy would check them once `tools` passes.
TOOLS_PASS = """
profiles:
  tools:
    routes:
      /v1/chat/completions:
        fields:
          tools: {action: pass}
"""


@pytest.fixture(scope="module")
def tools_policy() -> Policy:
    return Policy(parse_policy_text(POLICY.read_text() + TOOLS_PASS))


def with_tools(policy: Policy, tools: Any) -> Decision:
    return apply_policy(policy, CHAT, chat(tools=tools), profile="tools")


TOOL_PROBLEMS = [
    ([{"type": "function"}], "tools[0].function", "missing_required_parameter"),
    (
        [{"type": "function", "function": {}}],
        "tools[0].function.name",
        "missing_required_parameter",
    ),
    (
        [{"type": "function", "function": {"name": "get weather"}}],
        "tools[0].function.name",
        "invalid_value",
    ),
    (
        [{"type": "function", "function": {"name": "f" * 65}}],
        "tools[0].function.name",
        "invalid_value",
    ),
    (
        [{"type": "function", "function": {"name": "f", "parameters": "{}"}}],
        "tools[0].function.parameters",
        "invalid_type",
    ),
    (
        [{"type": "function", "function": {"name": "f", "strict": "yes"}}],
        "tools[0].function.strict",
        "invalid_type",
    ),
    (
        [{"type": "function", "function": {"name": "f", "colour": 1}}],
        "tools[0].function.colour",
        "unknown_parameter",
    ),
    ([{"type": "web_search"}], "tools[0].type", "invalid_value"),
    ([TOOL, {"function": {"name": "f"}}], "tools[1].type", "missing_required_parameter"),
]


@pytest.mark.parametrize(("tools", "param", "code"), TOOL_PROBLEMS)
def test_tool_definitions_are_checked_as_openai_checks_them(
    tools_policy: Policy, tools: Any, param: str, code: str
) -> None:
    decision = with_tools(tools_policy, tools)
    assert decision.error is not None
    assert (decision.error.param, decision.error.code) == (param, code)


def test_good_tool_definitions_pass(tools_policy: Policy) -> None:
    tools = [TOOL, {"type": "function", "function": {"name": "a-b_9", "strict": True}}]
    assert with_tools(tools_policy, tools).error is None
    # ...but not without the profile: the default policy refuses tools.
    refused = apply_policy(tools_policy, CHAT, chat(tools=tools))
    assert refused.error is not None and refused.error.param == "tools"


# Each action of a member rule, on a small policy.
SMALL = """
version: 1
routes:
  /v1/chat/completions:
    fields:
      model: {action: pass, type: string}
      messages:
        action: pass
        type: array
        select:
          key: role
          rules:
            user:
              fields:
                content:
                  action: pass
                  type: [string, array]
                  select:
                    key: type
                    rules:
                      text: {}
                      note: {action: strip}
                      quote: {action: rename, to: text}
                      blank: {action: reject, neutral: [{type: blank}], drop_neutral: false}
                    unknown: {action: pass}
                lang: {action: default, value: en}
                draft: {action: strip}
                tag: {action: rename, to: label}
                label: {action: pass, type: string}
              unknown_fields: strip
            note: {action: strip}
          unknown: {action: reject, reason: Ask for a known role.}
"""


@pytest.fixture(scope="module")
def small() -> Policy:
    return Policy(parse_policy_text(SMALL))


def test_member_actions(small: Policy) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "note", "content": "dropped whole"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "note", "text": "b"},
                {"type": "quote", "text": "c"},
                {"type": "blank"},
                {"type": "sticker", "id": 3},
            ],
            "draft": True,
            "tag": "x",
            "colour": "red",
        },
    ]
    body = {"model": "m", "messages": messages}
    decision = apply_policy(small, CHAT, body)
    assert decision.error is None
    assert decision.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "c"},
                {"type": "blank"},
                {"type": "sticker", "id": 3},
            ],
            "label": "x",
            "lang": "en",
        }
    ]
    actions = {(o.field, o.action) for o in decision.outcomes}
    assert actions == {
        ("messages[0]", "stripped"),
        ("messages[1].content[1]", "stripped"),
        ("messages[1].content[2].type", "renamed"),
        ("messages[1].content[3]", "neutral"),
        ("messages[1].draft", "stripped"),
        ("messages[1].tag", "renamed"),
        ("messages[1].colour", "stripped"),
        ("messages[1].lang", "defaulted"),
    }
    assert messages[1]["draft"] is True  # the client's objects are not modified


def test_an_unknown_member_follows_its_rule(small: Policy) -> None:
    decision = apply_policy(small, CHAT, {"model": "m", "messages": [{"role": "bot"}]})
    assert decision.error is not None
    assert decision.error.message == (
        "Invalid value: 'bot'. Supported values are: 'user', and 'note'. Ask for a known role."
    )
    blank = {"model": "m", "messages": [{"role": "user", "content": [{"type": "blank", "x": 1}]}]}
    refused = apply_policy(small, CHAT, blank)
    assert refused.error is not None and refused.error.code == "unsupported_value"


def test_a_rename_onto_a_present_key_is_refused(small: Policy) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x", "tag": "a", "label": "b"}]}
    decision = apply_policy(small, CHAT, body)
    assert decision.error is not None and decision.error.param == "messages[0].tag"
    assert "'messages[0].label'" in decision.error.message


# n served by fan-out.
@pytest.mark.parametrize(
    ("n", "fanout", "forwarded_n"), [(None, 1, None), (1, 1, 1), (2, 2, "absent"), (8, 8, "absent")]
)
def test_n_is_served_by_fan_out(policy: Policy, n: Any, fanout: int, forwarded_n: Any) -> None:
    decision = apply_policy(policy, CHAT, chat(n=n))
    assert decision.error is None and decision.fanout == fanout
    assert decision.body.get("n", "absent") == forwarded_n


@pytest.mark.parametrize(
    ("n", "code"),
    [
        (9, "integer_above_max_value"),
        (0, "integer_below_min_value"),
        (True, "invalid_type"),
        (1.5, "invalid_type"),
    ],
)
def test_n_outside_the_fan_out_range_is_refused(policy: Policy, n: Any, code: str) -> None:
    decision = apply_policy(policy, CHAT, chat(n=n))
    assert decision.error is not None and (decision.error.param, decision.error.code) == ("n", code)
    assert decision.fanout == 1
