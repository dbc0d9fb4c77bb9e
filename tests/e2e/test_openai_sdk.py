"""End to end with the official ``openai`` SDK as the client, through real servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.app.factory import create_app
from tests.support.bodies import CHAT, DONE, MODEL, chunk_event, completion
from tests.support.gateways import gateway_settings
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread


def recording_engine(received: list[dict[str, Any]]) -> Starlette:
    """An engine that answers like ft serve and remembers every body it got."""

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        received.append(body)
        if body.get("stream"):
            events = [chunk_event("Mis"), chunk_event("tral"), DONE]
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse(completion("Whiskers"))

    return Starlette(routes=[Route(CHAT, chat, methods=["POST"])])


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[openai.OpenAI, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    with ServerThread(recording_engine(received)) as engine:
        with ServerThread(create_app(gateway_settings(engine.url))) as gateway:
            with sync_sdk(gateway.url) as client:
                yield client, received


MESSAGES: Any = [{"role": "user", "content": "Invent a name for a cat."}]


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logit_bias": {"1": 10}}, "logit_bias"),
    ],
)
def test_rejected_field_raises_bad_request_naming_it(
    stack: tuple[openai.OpenAI, list[dict[str, Any]]], kwargs: dict[str, Any], param: str
) -> None:
    client, received = stack
    before = len(received)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, **kwargs)
    assert info.value.status_code == 400
    assert info.value.param == param
    assert info.value.code in ("unsupported_parameter", "unsupported_value")
    assert isinstance(info.value.body, dict) and info.value.body["param"] == param
    assert len(received) == before  # never reached the engine


def test_neutral_values_and_seed_pass(stack: tuple[openai.OpenAI, list[dict[str, Any]]]) -> None:
    client, received = stack
    answer = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        n=1,
        logprobs=False,
        seed=1234,
        temperature=1.0,
        max_tokens=20,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert answer.choices[0].message.content == "Whiskers"
    assert received[-1]["seed"] == 1234
    assert received[-1]["n"] == 1
    assert received[-1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_max_completion_tokens_reaches_the_engine_as_max_tokens(
    stack: tuple[openai.OpenAI, list[dict[str, Any]]],
) -> None:
    client, received = stack
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_completion_tokens=7)
    assert received[-1]["max_tokens"] == 7
    assert "max_completion_tokens" not in received[-1]


def test_streaming_through_the_sdk(stack: tuple[openai.OpenAI, list[dict[str, Any]]]) -> None:
    client, _ = stack
    stream = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        seed=7,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Mistral"


def test_stream_options_without_stream_is_rejected(
    stack: tuple[openai.OpenAI, list[dict[str, Any]]],
) -> None:
    client, _ = stack
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream_options={"include_usage": True}
        )
    assert info.value.param == "stream_options"
