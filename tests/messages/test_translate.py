"""A Messages request as a chat-completions request (pure): the translation field by field,
as tables of (request fields, chat fields), and the refusals, each naming its path."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.messages.translate import FORCED_WITH_THINKING, to_chat
from tests.support.anthropic import messages_request
from tests.support.bodies import MODEL

OFF = {"chat_template_kwargs": {"enable_thinking": False}}
HI = [{"role": "user", "content": "hi"}]
TOOL = {"name": "get_weather", "description": "The weather", "input_schema": {"type": "object"}}
CHAT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather",
        "parameters": {"type": "object"},
    },
}


def chat_of(**fields: Any) -> dict[str, Any]:
    return to_chat(messages_request(**fields))[0]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {"max_tokens": 64, **OFF}),
        (
            {"temperature": 0.2, "top_p": 0.9, "top_k": 40},
            {"temperature": 0.2, "top_p": 0.9, "top_k": 40},
        ),
        # Engine extensions the policy passes go as they are.
        ({"seed": 7, "min_p": 0.1}, {"seed": 7, "min_p": 0.1}),
        ({"stream": True}, {"stream": True, "stream_options": {"include_usage": True}}),
        ({"stream": False}, {}),
        # Kept by the gateway: never sent.
        ({"stop_sequences": ["END"], "metadata": {"user_id": "u1"}}, {}),
        ({"cache_control": {"type": "ephemeral"}, "service_tier": "auto"}, {}),
        ({"speed": "standard", "context_management": {}, "mcp_servers": []}, {}),
        # Claude Code's, on every request: what the translation does anyway.
        (
            {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
            {},
        ),
        ({"thinking": {"type": "disabled"}}, OFF),
        ({"thinking": {"type": "adaptive"}}, {"chat_template_kwargs": {"enable_thinking": True}}),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            {"chat_template_kwargs": {"enable_thinking": True}, "thinking_budget_tokens": 2048},
        ),
        (
            {"chat_template_kwargs": {"enable_thinking": False, "other": 1}},
            {"chat_template_kwargs": {"enable_thinking": False, "other": 1}},
        ),
        ({"tools": [TOOL]}, {"tools": [CHAT_TOOL]}),
        (
            {
                "tools": [
                    {
                        **TOOL,
                        "type": "custom",
                        "strict": True,
                        "cache_control": {"type": "ephemeral"},
                    }
                ]
            },
            {
                "tools": [
                    {"type": "function", "function": {**CHAT_TOOL["function"], "strict": True}}
                ]
            },
        ),
        ({"tools": []}, {}),
        ({"tool_choice": {"type": "auto"}}, {"tool_choice": "auto"}),
        ({"tool_choice": {"type": "any"}}, {"tool_choice": "required"}),
        ({"tool_choice": {"type": "none"}}, {"tool_choice": "none"}),
        (
            {"tool_choice": {"type": "tool", "name": "get_weather"}},
            {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        ),
        ({"output_config": {"effort": "high"}}, {"reasoning_effort": "high"}),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": True},
                }
            },
        ),
        (
            {"output_format": {"type": "json_schema", "schema": {"type": "object"}}},
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": True},
                }
            },
        ),
    ],
)
def test_fields_translate(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    chat = chat_of(**fields)
    assert chat.pop("messages") == HI
    assert chat.pop("model") == MODEL
    assert chat.pop("max_tokens") == 64
    expected = {k: v for k, v in expected.items() if k != "max_tokens"}
    expected = {**OFF, **expected}
    assert chat == expected


@pytest.mark.parametrize(
    ("fields", "wants"),
    [
        ({"stop_sequences": ["END", "", "STOP"]}, {"stops": ["END", "STOP"]}),
        ({"metadata": {"user_id": "u1"}}, {"user": "u1"}),
        ({"thinking": {"type": "adaptive"}}, {"thinking": True, "show_thinking": True}),
        (
            {"thinking": {"type": "adaptive", "display": "omitted"}},
            {"thinking": True, "show_thinking": False},
        ),
        ({"thinking": {"type": "disabled"}}, {"thinking": False}),
        ({"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, {"one_call": True}),
        (
            {"tool_choice": {"type": "auto", "disable_parallel_tool_use": False}},
            {"one_call": False},
        ),
    ],
)
def test_what_the_answer_must_do(fields: dict[str, Any], wants: dict[str, Any]) -> None:
    found = to_chat(messages_request(**fields))[1]
    for key, value in wants.items():
        assert getattr(found, key) == value


def test_a_count_asks_for_one_token_and_no_stream() -> None:
    chat, _ = to_chat({"model": MODEL, "messages": HI, "stream": True}, count=True)
    assert chat["max_tokens"] == 1 and "stream" not in chat


TEXT = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("system", "messages", "expected"),
    [
        ("Be brief.", HI, [{"role": "system", "content": "Be brief."}, *HI]),
        (
            [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}],
            HI,
            [{"role": "system", "content": "A"}, *HI],
        ),
        (
            [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
            HI,
            [
                {
                    "role": "system",
                    "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
                },
                *HI,
            ],
        ),
        # Claude Code's attribution block: Anthropic's API takes it out, so does the gateway.
        (
            [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.200;"},
                {"type": "text", "text": "You are Claude Code."},
            ],
            HI,
            [{"role": "system", "content": "You are Claude Code."}, *HI],
        ),
        (
            None,
            [{"role": "user", "content": [TEXT, {"type": "text", "text": "there"}]}],
            [{"role": "user", "content": [TEXT, {"type": "text", "text": "there"}]}],
        ),
        # Consecutive turns of one role are one turn, as Anthropic joins them.
        (
            None,
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                }
            ],
        ),
        (
            None,
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                        }
                    ],
                }
            ],
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                    ],
                }
            ],
        ),
        (
            None,
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "url", "url": "https://x/cat.png"}}
                    ],
                }
            ],
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x/cat.png"}}],
                }
            ],
        ),
        # A system message inside messages stays where it stands (Claude Code 2.1.154+).
        (
            None,
            [
                *HI,
                {"role": "system", "content": [{"type": "text", "text": "Short."}]},
                {"role": "user", "content": "again"},
            ],
            [*HI, {"role": "system", "content": "Short."}, {"role": "user", "content": "again"}],
        ),
        # A tool loop: tool_use as tool_calls, tool_result as a tool message before the text.
        (
            None,
            [
                HI[0],
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Check.", "signature": "sig"},
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Oslo"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [{"type": "text", "text": "Rain"}],
                        },
                        {"type": "text", "text": "And tomorrow?"},
                    ],
                },
            ],
            [
                HI[0],
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "Rain"},
                {"role": "user", "content": "And tomorrow?"},
            ],
        ),
        # A thinking-only turn carries nothing the engine reads.
        (
            None,
            [
                HI[0],
                {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]},
                {"role": "user", "content": "b"},
            ],
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "b"}],
                }
            ],
        ),
    ],
)
def test_the_conversation_translates(system: Any, messages: Any, expected: Any) -> None:
    body = messages_request(messages=messages)
    if system is not None:
        body["system"] = system
    assert to_chat(body)[0]["messages"] == expected


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"max_tokens": 0}, "max_tokens", "invalid_value"),
        ({"container": "c_1"}, "container", "unsupported_parameter"),
        ({"speed": "fast"}, "speed", "unsupported_parameter"),
        (
            {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
            "context_management.edits[0].type",
            "unsupported_value",
        ),
        (
            {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            "tools[0].type",
            "unsupported_value",
        ),
        (
            {"tools": [{**TOOL, "defer_loading": True}]},
            "tools[0].defer_loading",
            "unsupported_parameter",
        ),
        (
            {"tools": [{**TOOL, "input_examples": [{}]}]},
            "tools[0].input_examples",
            "unsupported_parameter",
        ),
        ({"tools": [{"name": "x"}]}, "tools[0].input_schema", "missing_required_parameter"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.name", "missing_required_parameter"),
        ({"tool_choice": {"type": "maybe"}}, "tool_choice.type", "unsupported_value"),
        ({"thinking": {"type": "deep"}}, "thinking.type", "unsupported_value"),
        (
            {"output_config": {"task_budget": 10}},
            "output_config.task_budget",
            "unsupported_parameter",
        ),
        (
            {"output_config": {"format": {"type": "regex"}}},
            "output_config.format.type",
            "unsupported_value",
        ),
        ({"stop_sequences": "END"}, "stop_sequences", "invalid_type"),
        # The request says no thinking; the extension says otherwise.
        (
            {"chat_template_kwargs": {"enable_thinking": True}},
            "chat_template_kwargs.enable_thinking",
            "invalid_value",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            "messages[0].content[0].type",
            "unsupported_value",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "x", "citations": [{}]}]}
                ]
            },
            "messages[0].content[0].citations",
            "unsupported_parameter",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}],
                    }
                ]
            },
            "messages[0].content[0].source.type",
            "unsupported_value",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": "x",
                                "is_error": True,
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0].is_error",
            "unsupported_parameter",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "image", "source": {}}],
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0].content[0].type",
            "unsupported_value",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            TEXT,
                            {"type": "tool_result", "tool_use_id": "t", "content": "x"},
                        ],
                    }
                ]
            },
            "messages[0].content[1]",
            "invalid_value",
        ),
        (
            {"messages": [*HI, {"role": "assistant", "content": "Sure:"}]},
            "messages[1]",
            "unsupported_value",
        ),
        ({"messages": [{"role": "ctx", "content": "x"}]}, "messages[0].role", "invalid_value"),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "missing_required_parameter"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content", "invalid_type"),
        (
            {"messages": [{"role": "system", "content": [{"type": "text", "text": "x"}]}]},
            "messages",
            "missing_required_parameter",
        ),
        (
            {
                "messages": [
                    HI[0],
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "x", "input": "{}"}],
                    },
                    HI[0],
                ]
            },
            "messages[1].content[0].input",
            "invalid_type",
        ),
        ({"system": [{"type": "image", "source": {}}]}, "system[0].type", "unsupported_value"),
    ],
)
def test_what_chat_cannot_say_is_a_400_naming_it(
    fields: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        to_chat(messages_request(**fields))
    assert (caught.value.param, caught.value.code) == (param, code)
    assert param in caught.value.message


def test_forced_tool_use_with_thinking_is_anthropics_own_400() -> None:
    # Claude Code matches Anthropic's wording to retry without thinking.
    with pytest.raises(InvalidRequest) as caught:
        to_chat(messages_request(thinking={"type": "adaptive"}, tool_choice={"type": "any"}))
    assert caught.value.message == FORCED_WITH_THINKING
