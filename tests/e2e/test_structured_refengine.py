"""Structured outputs end to end against the reference engine with them on and one keyword
dropped (as a grammar converter drops it): the openai SDK's parse helpers through the
gateway (tests/fixtures/policies/structured.yaml). A schema the engine keeps parses; one
whose field asks for the dropped keyword is refused at its path, before the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
from pydantic import BaseModel, Field

from gateway.app.factory import create_app
from refengine.server import create_app as create_engine
from refengine.structured.options import StructuredOptions
from refengine.structured.schema import SchemaRules
from tests.support.gateways import gateway_settings
from tests.support.schemas import MESSAGES, MODEL, STRUCTURED
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
DROPPING = StructuredOptions(
    response_format=True, tools=True, schema=SchemaRules(drop=frozenset({"maxLength"}))
)


class Cat(BaseModel):
    name: str
    age: int


class ShortCat(BaseModel):
    name: str = Field(max_length=5)
    age: int


@asynccontextmanager
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    async with running_server(create_engine(structured=DROPPING)) as engine:
        settings = gateway_settings(engine, policy=STRUCTURED)
        async with running_server(create_app(settings)) as url, sdk(url) as api:
            yield api


async def test_chat_parse_gets_its_object_and_is_refused_where_the_engine_drops_a_keyword() -> None:
    async with client() as api:
        done = await api.chat.completions.parse(
            model=MODEL, messages=MESSAGES, response_format=Cat, seed=3
        )
        assert isinstance(done.choices[0].message.parsed, Cat)
        with pytest.raises(openai.BadRequestError) as caught:
            await api.chat.completions.parse(
                model=MODEL, messages=MESSAGES, response_format=ShortCat
            )
        body: Any = caught.value.body
        assert (body["param"], body["code"]) == (
            "response_format.json_schema.schema.properties.name.maxLength",
            "unsupported_schema_keyword",
        )


async def test_responses_parse_and_a_strict_tool_the_same_way() -> None:
    async with client() as api:
        done = await api.responses.parse(model=MODEL, input="A cat?", text_format=Cat)
        assert isinstance(done.output_parsed, Cat)
        with pytest.raises(openai.BadRequestError) as caught:
            await api.responses.parse(model=MODEL, input="A cat?", text_format=ShortCat)
        body: Any = caught.value.body
        assert body["param"] == "text.format.schema.properties.name.maxLength"
        tool = openai.pydantic_function_tool(Cat, name="make_cat")
        answer = await api.chat.completions.parse(
            model=MODEL, messages=MESSAGES, tools=[tool], tool_choice="required", seed=3
        )
        (call,) = answer.choices[0].message.tool_calls or []
        assert isinstance(call.function.parsed_arguments, Cat)
        short = openai.pydantic_function_tool(ShortCat, name="make_cat")
        with pytest.raises(openai.BadRequestError) as caught:
            await api.chat.completions.parse(model=MODEL, messages=MESSAGES, tools=[short])
        body = caught.value.body
        assert body["param"] == "tools[0].function.parameters.properties.name.maxLength"
