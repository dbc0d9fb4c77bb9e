"""The Messages API's whole answer from a chat completion (pure): ids, blocks, the stop
reason, usage as Anthropic counts it, and what the engine got wrong, as a 502."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.messages.shape import message_object, stop_reason, usage_of
from gateway.messages.translate import Wants


def chat(
    message: dict[str, Any], *, finish: str | None = "stop", usage: Any = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "served-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def answer(message: dict[str, Any], wants: Wants | None = None, **kw: Any) -> dict[str, Any]:
    return message_object(
        chat(message, **kw), message_id="msg_1", model="asked", wants=wants or Wants()
    )


def test_a_text_answer() -> None:
    out = answer({"content": "Hello."})
    assert out == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "served-model",
        "content": [{"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }


@pytest.mark.parametrize(
    ("finish", "matched", "tool_use", "expected"),
    [
        ("stop", None, False, "end_turn"),
        ("length", None, False, "max_tokens"),
        ("tool_calls", None, True, "tool_use"),
        ("stop", None, True, "tool_use"),
        ("length", None, True, "max_tokens"),  # cut inside a call: max_tokens, as Anthropic
        ("stop", "END", False, "stop_sequence"),
        ("content_filter", None, False, "refusal"),
        (None, None, False, "end_turn"),
    ],
)
def test_stop_reason(finish: Any, matched: str | None, tool_use: bool, expected: str) -> None:
    assert stop_reason(finish, matched=matched, tool_use=tool_use) == expected


def test_usage_leaves_the_cached_prompt_out_of_input_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    assert usage_of(usage) == {
        "input_tokens": 36,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 64,
    }
    assert usage_of(None) == {"input_tokens": 0, "output_tokens": 0}


def test_reasoning_and_an_inline_thought_are_thinking_blocks_with_an_empty_signature() -> None:
    out = answer({"reasoning_content": "Plan.", "content": "Hi."})
    assert out["content"] == [
        {"type": "thinking", "thinking": "Plan.", "signature": ""},
        {"type": "text", "text": "Hi."},
    ]
    inline = answer({"content": "<think>\nPlan.\n</think>\n\nHi."}, Wants(thinking=True))
    assert inline["content"] == out["content"]
    # Without thinking asked, the engine's text is the text.
    assert answer({"content": "<think>x</think>Hi."})["content"][0]["type"] == "text"
    hidden = answer({"reasoning_content": "Plan.", "content": "Hi."}, Wants(show_thinking=False))
    assert hidden["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}


def test_tool_calls_are_tool_use_blocks_with_their_input_parsed() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
        {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": ""}},
    ]
    out = answer({"content": None, "tool_calls": calls}, finish="tool_calls")
    assert [(b["type"], b["name"], b["input"]) for b in out["content"]] == [
        ("tool_use", "a", {"x": 1}),
        ("tool_use", "b", {}),
    ]
    assert all(b["id"].startswith("toolu_01") and len(b["id"]) == 30 for b in out["content"])
    assert out["stop_reason"] == "tool_use"
    one = answer({"content": None, "tool_calls": calls}, Wants(one_call=True), finish="tool_calls")
    assert [b["name"] for b in one["content"]] == ["a"]


def test_a_matched_stop_sequence_cuts_the_text_and_drops_later_calls() -> None:
    calls = [{"id": "c", "type": "function", "function": {"name": "a", "arguments": "{}"}}]
    out = answer({"content": "one END two", "tool_calls": calls}, Wants(stops=["END"]))
    assert out["content"] == [{"type": "text", "text": "one "}]
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "END")


@pytest.mark.parametrize(
    "engine",
    [
        {"choices": []},
        {"choices": [{"index": 0}]},
        chat(
            {
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "a", "arguments": "[1]"}}
                ],
            }
        ),
        chat(
            {
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "a", "arguments": "{oops"}}
                ],
            }
        ),
        chat({"content": None, "tool_calls": [{"id": "c", "type": "function"}]}),
    ],
)
def test_what_the_engine_got_wrong_is_a_502_never_a_quiet_default(engine: dict[str, Any]) -> None:
    with pytest.raises(UpstreamProtocolError):
        message_object(engine, message_id="msg_1", model="m", wants=Wants())
