"""Body capture keeps in clear only what is listed as safe to keep (the model, roles, part
and tool types, tool names, enumerated settings, numbers and booleans): every other
string, in a field known today or one an API adds tomorrow, is written as as many ``x``
(docs/policy.md#recorded-bodies). A secret-looking value is redacted even where clear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.observe.capture import SECRET, redact
from tests.support.engine import FakeEngine
from tests.support.gateways import gateway_settings
from tests.support.servers import running_server

PRIVATE = "Alice Smith, 4111 1111 1111 1111"


def x(text: str) -> str:
    return "x" * len(text)


SETTINGS: dict[str, Any] = {
    "model": "m",
    "temperature": 0.5,
    "logprobs": True,
    "tool_choice": "auto",
    "response_format": {"type": "json_object"},
    "reasoning_effort": "low",
    "service_tier": "auto",
    "encoding_format": "float",
    "include": ["reasoning.encrypted_content"],
}
TEXT_PART = {"type": "text"}


def tool(description: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"city": {"type": "string", "format": "uri"}}}
    function = {"name": "get_weather", "description": description, "parameters": schema}
    return {"type": "function", "function": function}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # rerank's query and documents
        (
            {"model": "rr", "query": PRIVATE, "documents": [PRIVATE, "b"], "top_n": 2},
            {"model": "rr", "query": x(PRIVATE), "documents": [x(PRIVATE), "x"], "top_n": 2},
        ),
        # chat_template_kwargs, stop and a message's name
        (
            {
                "chat_template_kwargs": {"enable_thinking": False, "persona": PRIVATE},
                "stop": ["STOP-WORD", PRIVATE],
                "messages": [{"role": "user", "name": "alice_smith", "content": "hi"}],
            },
            {
                "chat_template_kwargs": {"enable_thinking": False, "persona": x(PRIVATE)},
                "stop": [x("STOP-WORD"), x(PRIVATE)],
                "messages": [{"role": "user", "name": x("alice_smith"), "content": "xx"}],
            },
        ),
        # Responses metadata, and the input's items
        (
            {"metadata": {"customer": PRIVATE}, "input": [{"role": "user", "content": "q"}]},
            {"metadata": {"customer": x(PRIVATE)}, "input": [{"role": "user", "content": "x"}]},
        ),
        # a field nobody has listed yet: redacted by default
        ({"brand_new_field": PRIVATE, "n": 2}, {"brand_new_field": x(PRIVATE), "n": 2}),
        ({"extra": {"deep": [{"deeper": PRIVATE}]}}, {"extra": {"deep": [{"deeper": x(PRIVATE)}]}}),
        # kept: what the policy decides by
        (
            SETTINGS | {"messages": [{"role": "user", "content": [TEXT_PART | {"text": "hi"}]}]},
            SETTINGS | {"messages": [{"role": "user", "content": [TEXT_PART | {"text": "xx"}]}]},
        ),
        # tools: their type and name kept, their words not (the schema's types kept)
        ({"tools": [tool(PRIVATE)]}, {"tools": [tool(x(PRIVATE))]}),
        # a secret where a clear value would be
        ({"model": "sk-proj-abcdefghijklmnop12"}, {"model": SECRET}),
    ],
)
def test_only_listed_values_are_captured_in_clear(
    body: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert redact(body, text=True) == expected


@pytest.mark.anyio
async def test_a_captured_rerank_request_on_a_real_server_keeps_none_of_its_words(
    fake_engine: FakeEngine, tmp_path: Path
) -> None:
    path = tmp_path / "bodies.jsonl"
    overrides: dict[tuple[str, ...], Any] = {
        ("capture", "enabled"): True,
        ("capture", "path"): str(path),
        ("capture", "sample_ratio"): 1.0,
    }
    app = create_app(gateway_settings(fake_engine.url, overrides=overrides))
    body = {"model": "rr", "query": PRIVATE, "documents": [PRIVATE, "other words"]}
    async with running_server(app) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            await client.post("/v1/rerank", json=body)
    text = path.read_text()
    assert "Alice" not in text and "4111 1111" not in text and "other words" not in text
    assert json.loads(text)["body"]["model"] == "rr"
