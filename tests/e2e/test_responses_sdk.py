"""The whole chain for the Responses API: the official openai SDK's ``responses.create`` and
``responses.stream`` -> the gateway (translate mode, default settings) -> the reference
engine. Text, usage, the full event sequence the SDK's own stream parser accepts, seeded
replays, and fields the gateway refuses before the engine sees them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseTextDeltaEvent,
)

from refengine.server import create_app as create_engine
from tests.e2e.test_refengine import neighbour
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_in_front_of
from tests.support.responses import STARTED, TEXT_MESSAGE
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
CAT = "Invent a name for a cat."
EVENTS = [*STARTED, *TEXT_MESSAGE, "response.completed"]


@asynccontextmanager
async def chain() -> AsyncIterator[tuple[openai.AsyncOpenAI, Any]]:
    engine_app = create_engine(max_batch=16)
    async with (
        running_server(engine_app) as engine_url,
        gateway_in_front_of(engine_url) as gateway_url,
        sdk(gateway_url) as client,
    ):
        yield client, engine_app.state.engine


async def test_create_returns_text_and_usage() -> None:
    async with chain() as (client, _):
        response = await client.responses.create(
            model=MODEL, input=CAT, instructions="Answer in a few words.",
            max_output_tokens=16, extra_body=NO_THINKING,
        )  # fmt: skip
    assert isinstance(response, Response)
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.output_text
    assert response.status in ("completed", "incomplete")
    assert response.usage is not None
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.output[0].type == "message"


async def test_a_cut_answer_is_incomplete() -> None:
    async with chain() as (client, _):
        # Greedy: a sampled first token may be the end of the answer (then it is complete).
        response = await client.responses.create(
            model=MODEL, input=CAT, max_output_tokens=1, temperature=0, extra_body=NO_THINKING
        )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None and response.usage.output_tokens == 1


async def test_stream_gives_every_event_to_the_sdk_parser() -> None:
    async with chain() as (client, _):
        async with client.responses.stream(
            model=MODEL,
            input=CAT,
            max_output_tokens=200,
            temperature=0.8,
            extra_body={"seed": 5, **NO_THINKING},
        ) as stream:
            events = [event async for event in stream]
            final = await stream.get_final_response()
    names = [event.type for event in events]
    deltas = [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)]
    assert deltas and len(deltas) == names.count("response.output_text.delta")
    squeezed = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
    assert squeezed[:-1] == EVENTS[:-1]
    assert squeezed[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == "".join(deltas)
    assert final.usage is not None and final.usage.output_tokens > 0
    if isinstance(events[-1], ResponseCompletedEvent):
        assert events[-1].response.output_text == final.output_text


async def seeded(client: openai.AsyncOpenAI, seed: int) -> str:
    response = await client.responses.create(
        model=MODEL, input=CAT, max_output_tokens=24, temperature=1.0,
        extra_body={"seed": seed, **NO_THINKING},
    )  # fmt: skip
    return response.output_text


async def test_a_seeded_request_replays_identically_and_matches_the_chat_route() -> None:
    async with chain() as (client, engine):
        alone = await seeded(client, 77)
        texts = []
        for _ in range(2):
            results = await asyncio.gather(
                *(neighbour(client, i) for i in range(3)), seeded(client, 77)
            )
            texts.append(results[-1])
        chat = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": CAT}], max_tokens=24,
            temperature=1.0, seed=77, extra_body=NO_THINKING,
        )  # fmt: skip
        assert engine.stats.max_batch_seen > 1
    assert alone and texts == [alone, alone]
    assert chat.choices[0].message.content == alone


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {
                "text": {
                    "format": {"type": "json_schema", "name": "cat", "schema": {"type": "object"}}
                }
            },
            "text.format.type",
        ),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ],
)
async def test_a_refused_field_is_a_400_naming_it_and_never_reaches_the_engine(
    fields: dict[str, Any], param: str
) -> None:
    async with chain() as (client, engine):
        before = engine.stats.admitted
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model=MODEL, input=CAT, **fields)
        assert info.value.param == param
        assert engine.stats.admitted == before
