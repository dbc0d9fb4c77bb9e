"""The whole chain for Anthropic's Messages API: the official ``anthropic`` SDK (its newest:
Bearer auth, anthropic-version 2026-10-21, no temperature argument) -> the gateway
(translate mode, default settings) -> the reference engine. create, stream (the SDK's own
event accumulator), count_tokens, thinking, stop sequences, tools (the reference engine's
tool mode behind a policy that passes them), and a field the engine would ignore, as
anthropic.BadRequestError naming it before the engine sees it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import TextBlock, ThinkingBlock, ToolUseBlock

from refengine.server import create_app as create_engine
from refengine.structured.options import StructuredOptions
from tests.support.anthropic import ONE_TEXT_BLOCK, squeezed, tools_policy
from tests.support.bodies import MODEL
from tests.support.gateways import gateway_settings, serve_gateway
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
CAT: Any = [{"role": "user", "content": "Invent a name for a cat."}]
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@asynccontextmanager
async def chain(policy: Path | None = None) -> AsyncIterator[anthropic.AsyncAnthropic]:
    engine = create_engine(max_batch=16, structured=StructuredOptions(tools=True))
    async with running_server(engine) as engine_url:
        settings = (
            gateway_settings(engine_url)
            if policy is None
            else gateway_settings(engine_url, policy=policy)
        )
        async with (
            serve_gateway(settings) as gw,
            anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-test", max_retries=0) as client,
        ):
            yield client


async def test_create_returns_text_and_usage() -> None:
    async with chain() as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=24, system="Answer in a few words.", messages=CAT
        )
    assert message.id.startswith("msg_") and message.type == "message"
    assert message.role == "assistant" and message.model == MODEL
    [block] = message.content
    assert isinstance(block, TextBlock) and block.text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and 0 < message.usage.output_tokens <= 24
    assert message._request_id


async def test_a_cut_answer_stops_at_max_tokens() -> None:
    async with chain() as client:
        # Greedy (temperature through extra_body: the newest SDK takes no argument for it).
        message = await client.messages.create(
            model=MODEL, max_tokens=1, messages=CAT, extra_body={"temperature": 0}
        )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 1


async def test_stream_gives_every_event_to_the_sdk() -> None:
    async with (
        chain() as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=CAT) as stream,
    ):
        names = []
        texts = []
        async for event in stream:
            names.append(event.type)
            if event.type == "text":
                texts.append(event.text)
        final = await stream.get_final_message()
    # The SDK's stream adds its own "text" event beside each text delta and drops ping.
    raw = [n for n in names if n != "text"]
    assert squeezed(raw) == [n for n in ONE_TEXT_BLOCK if n != "ping"]
    [block] = final.content
    assert isinstance(block, TextBlock) and block.text == "".join(texts)
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    assert final.stop_reason in ("end_turn", "max_tokens")


async def test_count_tokens_is_the_engines_count() -> None:
    async with chain() as client:
        short = await client.messages.count_tokens(model=MODEL, messages=CAT)
        longer = await client.messages.count_tokens(
            model=MODEL, system="Answer in a few words, please, and kindly.", messages=CAT
        )
        asked = await client.messages.create(model=MODEL, max_tokens=4, messages=CAT)
    assert short.input_tokens == asked.usage.input_tokens > 0
    assert longer.input_tokens > short.input_tokens


async def test_thinking_comes_back_as_a_thinking_block() -> None:
    async with chain() as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=64, messages=CAT, thinking={"type": "adaptive"}
        )
        none = await client.messages.create(
            model=MODEL, max_tokens=64, messages=CAT, thinking={"type": "disabled"}
        )
    thought = message.content[0]
    assert isinstance(thought, ThinkingBlock) and thought.thinking and thought.signature == ""
    assert "<think>" not in "".join(b.text for b in message.content if isinstance(b, TextBlock))
    assert not any(isinstance(b, ThinkingBlock) for b in none.content)


async def test_a_stop_sequence_ends_the_answer_and_is_named() -> None:
    async with chain() as client:
        free = await client.messages.create(
            model=MODEL, max_tokens=40, messages=CAT, extra_body={"temperature": 0}
        )
        text = "".join(b.text for b in free.content if isinstance(b, TextBlock))
        word = text.split()[2]
        stopped = await client.messages.create(
            model=MODEL,
            max_tokens=40,
            messages=CAT,
            stop_sequences=[word],
            extra_body={"temperature": 0},
        )
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", word)
    [block] = stopped.content
    assert isinstance(block, TextBlock) and block.text == text[: text.index(word)]


async def test_tools_call_and_answer_the_result(tmp_path: Path) -> None:
    ask: Any = [{"role": "user", "content": "What is get_weather in Oslo?"}]
    async with chain(tools_policy(tmp_path)) as client:
        called = await client.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=ask,
            tools=[WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
        )
        assert called.stop_reason == "tool_use"
        [use] = [b for b in called.content if isinstance(b, ToolUseBlock)]
        assert use.name == "get_weather" and use.id.startswith("toolu_")
        assert isinstance(use.input, dict) and isinstance(use.input.get("city"), str)
        history: Any = [
            *ask,
            {"role": "assistant", "content": called.content},  # as the SDK's docs pass it
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C"}
                ],
            },
        ]
        answered = await client.messages.create(
            model=MODEL, max_tokens=32, messages=history, tools=[WEATHER]
        )
        async with client.messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=ask,
            tools=[WEATHER],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
        ) as stream:
            final = await stream.get_final_message()
    assert answered.stop_reason in ("end_turn", "max_tokens")
    assert isinstance(answered.content[0], TextBlock | ThinkingBlock)
    [streamed] = [b for b in final.content if isinstance(b, ToolUseBlock)]
    assert streamed.name == "get_weather" and isinstance(streamed.input.get("city"), str)


async def test_a_field_the_engine_would_ignore_is_a_bad_request_naming_it() -> None:
    async with chain() as client:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.create(model=MODEL, max_tokens=8, messages=CAT, tools=[WEATHER])
        with pytest.raises(anthropic.BadRequestError) as image:
            await client.messages.create(
                model=MODEL,
                max_tokens=8,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://example.com/c.png"},
                            }
                        ],
                    }
                ],
            )
    assert refused.value.status_code == 400 and refused.value.type == "invalid_request_error"
    assert refused.value.api_message is not None
    assert refused.value.api_message.startswith("tools: ")
    assert "Tool calling is not supported" in refused.value.api_message
    assert refused.value.request_id
    assert image.value.api_message is not None
    assert image.value.api_message.startswith("messages.0.content.0.type: ")
