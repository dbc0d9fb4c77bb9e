"""Inside messages, end to end: the official openai SDK through the gateway to the
reference engine, which (like many engines' chat templates) would drop an image
part and render an unknown role without a word."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from refengine.server import create_app as create_engine
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_in_front_of
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


@pytest.fixture
async def chain() -> AsyncIterator[tuple[openai.AsyncOpenAI, openai.AsyncOpenAI]]:
    async with (
        running_server(create_engine()) as engine_url,
        gateway_in_front_of(engine_url) as gateway_url,
        sdk(gateway_url) as gateway,
        sdk(engine_url) as engine,
    ):
        yield gateway, engine


@pytest.mark.parametrize(
    ("messages", "param", "code"),
    [
        (
            [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE]}],
            "messages[0].content[1].type",
            "unsupported_value",
        ),
        (
            [{"role": "wizard", "content": "Invent a name for a cat."}],
            "messages[0].role",
            "invalid_value",
        ),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
            "messages[1].role",
            "unsupported_value",
        ),
    ],
)
async def test_the_sdk_sees_bad_request_naming_the_path(
    chain: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI], messages: Any, param: str, code: str
) -> None:
    gateway, engine = chain
    # The engine alone answers 200: the silent no-op the gateway is there to catch.
    alone = await engine.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4, extra_body=NO_THINKING
    )
    assert alone.choices[0].message.content is not None
    with pytest.raises(openai.BadRequestError) as info:
        await gateway.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=4, extra_body=NO_THINKING
        )
    assert info.value.status_code == 400
    assert (info.value.param, info.value.code) == (param, code)


async def test_a_developer_message_reaches_the_engine_as_system(
    chain: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI],
) -> None:
    gateway, engine = chain
    text = "Answer in one word, always, whatever the question."
    asked: Any = [{"role": "developer", "content": text}, {"role": "user", "content": "hi"}]
    as_system: Any = [{"role": "system", "content": text}, {"role": "user", "content": "hi"}]
    through = await gateway.chat.completions.create(
        model=MODEL, messages=asked, max_tokens=4, seed=5, extra_body=NO_THINKING
    )
    direct = await engine.chat.completions.create(
        model=MODEL, messages=as_system, max_tokens=4, seed=5, extra_body=NO_THINKING
    )
    # The same prompt (so the same tokens and the same seeded answer) as a system message.
    assert through.usage is not None and direct.usage is not None
    assert through.usage.prompt_tokens == direct.usage.prompt_tokens
    assert through.choices[0].message.content == direct.choices[0].message.content
