"""The Messages API's event stream from chat chunks (pure): the shaper fed raw SSE text
through the one relay loop, no HTTP. The event sequences are table-tested against
Anthropic's (platform.claude.com/docs/en/build-with-claude/streaming): message_start,
ping, per block content_block_start / _delta / _stop with its index, one message_delta
with the stop reason and the cumulative usage, message_stop; and ``event: error`` once
the answer has started."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.messages.stream import MessageStream
from gateway.messages.translate import Wants
from gateway.proxy.relay import relay_stream
from tests.support.anthropic import ONE_TEXT_BLOCK, anthropic_events, squeezed

pytestmark = pytest.mark.anyio
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
DONE = "data: [DONE]\n\n"


def chunk(
    delta: dict[str, Any] | None = None, *, finish: str | None = None, usage: Any = None
) -> str:
    body: dict[str, Any] = {
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    }
    if usage is not None:
        body["usage"] = usage
    return "data: " + json.dumps(body) + "\n\n"


def text(piece: str) -> str:
    return chunk({"content": piece})


def call(index: int, *, name: str | None = None, arguments: str = "") -> str:
    function: dict[str, Any] = {"arguments": arguments}
    entry: dict[str, Any] = {"index": index, "function": function}
    if name is not None:
        entry["id"] = f"call_{index}"
        function["name"] = name
    return chunk({"tool_calls": [entry]})


def end(finish: str = "stop") -> list[str]:
    return [chunk({}, finish=finish), chunk(usage=USAGE), DONE]


async def feed(pieces: list[str]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece.encode()


async def relayed(pieces: list[str], **wants: Any) -> list[tuple[str, dict[str, Any]]]:
    shaper = MessageStream("msg_1", "m", Wants(**wants))
    out = b"".join([c async for c in relay_stream(feed(pieces), shaper)])
    return anthropic_events(out)


def blocks(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, str]]:
    return [
        (d["index"], d["content_block"]["type"]) for n, d in events if n == "content_block_start"
    ]


THINK = "content_block_start content_block_delta content_block_stop".split()
CASES: list[tuple[str, list[str], dict[str, Any], list[str], list[str], str]] = [
    ("text", [text("Hel"), text("lo"), *end()], {}, ONE_TEXT_BLOCK, ["text"], "end_turn"),
    (
        "an empty answer has no block",
        end(),
        {},
        ["message_start", "ping", "message_delta", "message_stop"],
        [],
        "end_turn",
    ),
    (
        "cut at max_tokens",
        [text("Hel"), *end("length")],
        {},
        ONE_TEXT_BLOCK,
        ["text"],
        "max_tokens",
    ),
    (
        "reasoning_content is a thinking block, then the text",
        [
            chunk({"reasoning_content": "Plan"}),
            chunk({"reasoning_content": "."}),
            text("Hi"),
            *end(),
        ],
        {},
        ["message_start", "ping", *THINK, *THINK, "message_delta", "message_stop"],
        ["thinking", "text"],
        "end_turn",
    ),
    (
        "a leading <think> block, when thinking was asked",
        [text("<think>\nPl"), text("an\n</thi"), text("nk>\n\nHi"), *end()],
        {"thinking": True},
        ["message_start", "ping", *THINK, *THINK, "message_delta", "message_stop"],
        ["thinking", "text"],
        "end_turn",
    ),
    (
        "a <think> tag is text when thinking was not asked",
        [text("<think>x</think>"), *end()],
        {},
        ONE_TEXT_BLOCK,
        ["text"],
        "end_turn",
    ),
    (
        "text, then a tool call",
        [
            text("Looking."),
            call(0, name="get_weather"),
            call(0, arguments='{"city":'),
            call(0, arguments='"Oslo"}'),
            *end("tool_calls"),
        ],
        {},
        ["message_start", "ping", *THINK, *THINK, "message_delta", "message_stop"],
        ["text", "tool_use"],
        "tool_use",
    ),
    (
        "two tool calls are two blocks",
        [call(0, name="a", arguments="{}"), call(1, name="b", arguments="{}"), *end("tool_calls")],
        {},
        ["message_start", "ping", *THINK, *THINK, "message_delta", "message_stop"],
        ["tool_use", "tool_use"],
        "tool_use",
    ),
    (
        "disable_parallel_tool_use keeps the first call",
        [call(0, name="a", arguments="{}"), call(1, name="b", arguments="{}"), *end("tool_calls")],
        {"one_call": True},
        ["message_start", "ping", *THINK, "message_delta", "message_stop"],
        ["tool_use"],
        "tool_use",
    ),
    (
        "a tool call an engine ends with stop is still tool_use",
        [call(0, name="a", arguments="{}"), *end("stop")],
        {},
        ["message_start", "ping", *THINK, "message_delta", "message_stop"],
        ["tool_use"],
        "tool_use",
    ),
    (
        "a stop sequence matched by the gateway ends the text",
        [text("one two EN"), text("D three"), call(0, name="a", arguments="{}"), *end()],
        {"stops": ["END"]},
        ONE_TEXT_BLOCK,
        ["text"],
        "stop_sequence",
    ),
]


@pytest.mark.parametrize(
    ("pieces", "wants", "names", "kinds", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
async def test_the_event_sequence_is_anthropics(
    pieces: list[str], wants: dict[str, Any], names: list[str], kinds: list[str], reason: str
) -> None:
    events = await relayed(pieces, **wants)
    assert squeezed([n for n, _ in events]) == names
    assert blocks(events) == list(enumerate(kinds))
    start = events[0][1]["message"]
    assert start["id"] == "msg_1" and start["content"] == [] and start["stop_reason"] is None
    # Every delta and stop names the block that is open, the one started last.
    opened = -1
    for name, data in events:
        if name == "content_block_start":
            opened = data["index"]
        elif name in ("content_block_delta", "content_block_stop"):
            assert data["index"] == opened
    [(_, delta)] = [(n, d) for n, d in events if n == "message_delta"]
    assert delta["delta"]["stop_reason"] == reason
    # Cumulative, and the prompt's count too (message_start could not know it).
    assert delta["usage"] == {"input_tokens": 12, "output_tokens": 5}


async def test_the_blocks_carry_what_the_engine_wrote() -> None:
    events = await relayed(
        [
            chunk({"reasoning_content": "Plan."}),
            text("Hi "),
            text("there"),
            call(0, name="get_weather"),
            call(0, arguments='{"city":"Oslo"}'),
            *end("tool_calls"),
        ]
    )
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert starts[1] == {"type": "text", "text": ""}
    assert starts[2]["type"] == "tool_use" and starts[2]["name"] == "get_weather"
    assert starts[2]["id"].startswith("toolu_01") and starts[2]["input"] == {}
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert deltas == [
        {"type": "thinking_delta", "thinking": "Plan."},
        {"type": "text_delta", "text": "Hi "},
        {"type": "text_delta", "text": "there"},
        {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'},
    ]


async def test_a_matched_stop_sequence_is_said_and_the_rest_left_out() -> None:
    events = await relayed([text("one two EN"), text("D three"), *end()], stops=["END"])
    said = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert said == "one two "
    [delta] = [d["delta"] for n, d in events if n == "message_delta"]
    assert delta == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


async def test_display_omitted_gives_the_thinking_block_without_its_thought() -> None:
    events = await relayed(
        [chunk({"reasoning_content": "Secret plan."}), text("Hi"), *end()], show_thinking=False
    )
    assert blocks(events) == [(0, "thinking"), (1, "text")]
    assert [d["delta"]["type"] for n, d in events if n == "content_block_delta"] == ["text_delta"]


FAILURES = [
    ("the engine cut the stream", [text("Hel")], "api_error"),
    (
        "the engine's own error event",
        [text("Hel"), 'data: {"error": {"message": "boom", "code": 500}}\n\n'],
        "api_error",
    ),
    ("a broken event", [text("Hel"), "data: {not json\n\n"], "api_error"),
    (
        "a tool call whose arguments are not an object",
        [call(0, name="a", arguments="[1, 2]"), *end("tool_calls")],
        "api_error",
    ),
    (
        "a tool call cut before its arguments are whole",
        [call(0, name="a", arguments='{"city": "Os'), *end("tool_calls")],
        "api_error",
    ),
]


@pytest.mark.parametrize(
    ("pieces", "kind"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
async def test_a_failure_once_started_is_an_error_event(pieces: list[str], kind: str) -> None:
    events = await relayed(pieces)
    assert events[0][0] == "message_start"
    name, data = events[-1]
    assert name == "error" and data["error"]["type"] == kind and data["error"]["message"]
    assert "message_stop" not in [n for n, _ in events]


async def test_each_chunk_goes_out_as_it_arrives() -> None:
    go = asyncio.Event()

    async def held() -> AsyncIterator[bytes]:
        yield text("Hel").encode()
        await go.wait()
        for piece in [text("lo"), *end()]:
            yield piece.encode()

    shaper = MessageStream("msg_1", "m", Wants())
    out = relay_stream(held(), shaper)
    first = await asyncio.wait_for(anext(out), 30)
    assert [n for n, _ in anthropic_events(first)] == ["message_start", "ping"]
    second = await asyncio.wait_for(anext(out), 30)
    assert [n for n, _ in anthropic_events(second)] == [
        "content_block_start",
        "content_block_delta",
    ]
    go.set()
    rest = b"".join([c async for c in out])
    assert [n for n, _ in anthropic_events(rest)][-1] == "message_stop"
    assert shaper.usage is not None and shaper.usage.prompt == 12
