"""What the table in docs/responses.md says for the fields clients send without asking,
both ways, over real sockets with the openai SDK: ``include: ["reasoning.encrypted_content"]``
is accepted and reasoning items come back with no blob (nothing claims the reasoning was
kept, as the engine's template drops it); a replayed history's reasoning items are left
out of the chat request; ``parallel_tool_calls: false`` keeps the first tool call, whole
and streamed; a field the policy names as a hint (strip) is accepted, counted, not sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.settings import load_settings
from tests.support.bodies import MODEL, completion
from tests.support.engine import JSON, FakeEngine, Seen, Wire, http_response
from tests.support.gateways import Gateway, serve_gateway
from tests.support.paths import FIXTURES, POLICY
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio
OPEN = FIXTURES / "policies" / "responses-open.yaml"


def answering(message: dict[str, Any]) -> Callable[[Seen, Wire], Any]:
    """An engine handler whose whole answer's message is ``message``."""

    async def handler(request: Seen, wire: Wire) -> None:
        body = completion("")
        body["choices"][0]["message"] = {"role": "assistant", **message}
        if message.get("tool_calls"):
            body["choices"][0]["finish_reason"] = "tool_calls"
        await wire.send(http_response(200, json.dumps(body).encode(), headers=JSON))

    return handler


@pytest.fixture
async def thinking_engine() -> AsyncIterator[FakeEngine]:
    message = {"content": "Tom.", "reasoning_content": "A short name suits a cat."}
    async with FakeEngine(answering(message)) as engine:
        yield engine


def settings_for(engine: FakeEngine, policy: Path = POLICY) -> Any:
    return load_settings(
        None,
        overrides={
            ("upstream", "url"): engine.url,
            ("listen", "port"): 0,
            ("policy",): str(policy),
        },
        environ={},
    )


@pytest.fixture
async def served(thinking_engine: FakeEngine) -> AsyncIterator[Gateway]:
    async with serve_gateway(settings_for(thinking_engine)) as gateway:
        yield gateway


async def test_include_encrypted_reasoning_gives_reasoning_without_a_blob(
    served: Gateway, thinking_engine: FakeEngine
) -> None:
    async with sdk(served.url) as client:
        response = await client.responses.create(
            model=MODEL,
            input="Name a cat.",
            include=["reasoning.encrypted_content"],
            reasoning={"summary": "auto"},
            store=False,
        )
        reasoning, message = response.output
        assert reasoning.type == "reasoning" and message.type == "message"
        assert reasoning.encrypted_content is None  # nothing claims the reasoning is carried
        assert reasoning.content is not None
        assert reasoning.content[0].text == "A short name suits a cat."
        assert response.reasoning is not None and response.reasoning.summary == "auto"
        sent = thinking_engine.requests[-1].json()
        assert "include" not in sent and "reasoning_effort" not in sent
        # Any other include entry is still refused, naming it.
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(
                model=MODEL, input="hi", include=["message.output_text.logprobs"]
            )
        assert refused.value.param == "include[0]"


async def test_replayed_reasoning_items_are_left_out_of_the_chat_request(
    served: Gateway, thinking_engine: FakeEngine
) -> None:
    async with sdk(served.url) as client:
        first = await client.responses.create(
            model=MODEL, input="Name a cat.", include=["reasoning.encrypted_content"], store=False
        )
        # Codex's stateless second turn: the whole history sent back, reasoning included,
        # plus an OpenAI blob that opens nowhere else.
        history: Any = [
            {"role": "user", "content": "Name a cat."},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-from-openai"},
            {"role": "user", "content": "Why?"},
        ]
        second = await client.responses.create(model=MODEL, input=history, store=False)
        assert second.status == "completed"
        assert thinking_engine.requests[-1].json()["messages"] == [
            {"role": "user", "content": "Name a cat."},
            {"role": "assistant", "content": "Tom."},
            {"role": "user", "content": "Why?"},
        ]
        # A reasoning item is still checked: an unknown key in it is a 400 naming it.
        odd: Any = [{"type": "reasoning", "summary": [], "wizard": 1}, history[-1]]
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(model=MODEL, input=odd)
        assert refused.value.param == "input[0].wizard"


CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
]
TOOLS: Any = [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}]


async def test_parallel_tool_calls_false_keeps_the_first_call() -> None:
    async with (
        FakeEngine(answering({"content": None, "tool_calls": CALLS})) as engine,
        serve_gateway(settings_for(engine, OPEN)) as served,
        sdk(served.url) as client,
    ):
        both = await client.responses.create(model=MODEL, input="go", tools=TOOLS)
        assert [item.type for item in both.output] == ["function_call", "function_call"]
        one = await client.responses.create(
            model=MODEL, input="go", tools=TOOLS, parallel_tool_calls=False
        )
        assert [(item.type, getattr(item, "name", None)) for item in one.output] == [
            ("function_call", "f")
        ]
        assert one.parallel_tool_calls is False
        assert "parallel_tool_calls" not in engine.requests[-1].json()


async def test_parallel_tool_calls_false_keeps_the_first_call_in_a_stream() -> None:
    chunks = [
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "f", "arguments": ""},
        },
        {
            "index": 1,
            "id": "call_2",
            "type": "function",
            "function": {"name": "g", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": "{}"}},
        {"index": 1, "function": {"arguments": "{}"}},
    ]

    async def handler(request: Seen, wire: Wire) -> None:
        events = b""
        for call in chunks:
            delta = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}], "model": MODEL}
            events += b"data: " + json.dumps(delta).encode() + b"\n\n"
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
        events += b"data: " + json.dumps(end).encode() + b"\n\n"
        events += b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"
        head = [(b"content-type", b"text/event-stream")]
        await wire.send(http_response(200, events, headers=head))

    async with (
        FakeEngine(handler) as engine,
        serve_gateway(settings_for(engine, OPEN)) as served,
        sdk(served.url) as client,
    ):
        async with client.responses.stream(
            model=MODEL, input="go", tools=TOOLS, parallel_tool_calls=False
        ) as stream:
            final = await stream.get_final_response()
        calls = [item for item in final.output if item.type == "function_call"]
        assert [(c.name, c.arguments) for c in calls] == [("f", "{}")]


async def test_a_field_named_as_a_hint_is_accepted_counted_and_not_sent(
    thinking_engine: FakeEngine, tmp_path: Path
) -> None:
    # The next client release's field, followed with a policy line and no code change.
    policy = tmp_path / "policy.yaml"
    text = POLICY.read_text().replace(
        "      access_programs: {action: strip, type: object}",
        "      access_programs: {action: strip, type: object}\n"
        "      next_release_field: {action: strip}",
    )
    assert "next_release_field" in text
    policy.write_text(text)
    async with (
        serve_gateway(settings_for(thinking_engine, policy)) as served,
        sdk(served.url) as client,
    ):
        response = await client.responses.create(
            model=MODEL, input="hi", extra_body={"next_release_field": {"x": 1}}
        )
        assert response.status == "completed"
        assert "next_release_field" not in thinking_engine.requests[-1].json()
        exchange = await served.recorder.wait_for_request(response._request_id or "")
        assert ("next_release_field", "stripped") in [
            (o.field, o.action) for o in exchange.outcomes
        ]
        with pytest.raises(openai.BadRequestError) as unknown:
            await client.responses.create(model=MODEL, input="hi", extra_body={"wizard": 1})
        assert unknown.value.code == "unknown_parameter" and unknown.value.param == "wizard"
