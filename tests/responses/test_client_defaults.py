"""The default request bodies of today's Responses clients (tests/fixtures/clients/, each
naming its client, version and sources) against the shipped policy, over real sockets:
each passes, or gets a 400 only for a feature ft serve really lacks (tool calling, effort
control), and passes once that feature is taken out. What reaches the engine carries none
of the hints (cache marks, client metadata, access programs) and no earlier reasoning."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.settings import load_settings
from tests.support.bodies import MODEL
from tests.support.engine import FakeEngine
from tests.support.gateways import Gateway, serve_gateway
from tests.support.paths import FIXTURES, ROOT
from tests.support.responses import RESPONSES

pytestmark = pytest.mark.anyio
CLIENTS = sorted((FIXTURES / "clients").glob("*.json"))
_ITEM_TYPE = re.compile(r"input\[(\d+)\]\.type")
# Sent by the clients, never by the gateway to a chat engine.
_NOT_FOR_THE_ENGINE = {
    "include",
    "client_metadata",
    "access_programs",
    "prompt_cache_options",
    "prompt_cache_key",
    "parallel_tool_calls",
    "store",
    "truncation",
    "reasoning",
}


@pytest.fixture
async def served(fake_engine: FakeEngine) -> AsyncIterator[Gateway]:
    # The engine serves the names the clients send (their own defaults, such as Codex's).
    fake_engine.models += [json.loads(p.read_text())["body"]["model"] for p in CLIENTS]
    settings = load_settings(
        ROOT / "config.yaml",
        overrides={("upstream", "url"): fake_engine.url, ("listen", "port"): 0},
        environ={},
    )
    async with serve_gateway(settings) as gateway:
        yield gateway


def without(body: dict[str, Any], params: list[str]) -> dict[str, Any]:
    """``body`` less what each refused ``param`` asked for (an item, a field, a key)."""
    out = copy.deepcopy(body)
    items = sorted((int(m[1]) for p in params if (m := _ITEM_TYPE.fullmatch(p))), reverse=True)
    for index in items:
        del out["input"][index]
    for param in params:
        if _ITEM_TYPE.fullmatch(param):
            continue
        path = param.split(".")
        if "[" in path[0]:  # tools[0].type: the whole list goes
            out.pop(path[0].partition("[")[0])
            continue
        node = out
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1])
    return out


async def answer_of(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    if body.get("stream"):
        async with client.stream("POST", RESPONSES, json=body) as response:
            await response.aread()
            return response
    return await client.post(RESPONSES, json=body)


@pytest.mark.parametrize("path", CLIENTS, ids=[p.stem for p in CLIENTS])
async def test_a_client_default_body_passes_or_is_refused_only_for_what_the_engine_lacks(
    path: Path, served: Gateway, fake_engine: FakeEngine
) -> None:
    fixture = json.loads(path.read_text())
    body: dict[str, Any] = fixture["body"]
    refused: list[str] = list(fixture["refused_on_ft_serve"])
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        if fixture.get("reference_first_answer"):
            first = await client.post(RESPONSES, json={"model": MODEL, "input": "Name a cat."})
            said = first.json()["output"][0]["id"]
            body = json.loads(json.dumps(body).replace("<the first answer's message id>", said))
        answer = await answer_of(client, body)
        if refused:
            assert answer.status_code == 400, answer.text
            error = json.loads(answer.text)["error"]
            assert error["param"] in refused, error
            answer = await answer_of(client, without(body, refused))
        assert answer.status_code == 200, answer.text
        assert b"response.completed" in answer.content or answer.json()["status"] == "completed"
    sent = fake_engine.requests[-1].json()
    assert not _NOT_FOR_THE_ENGINE & set(sent), sent
    assert "prompt_cache_breakpoint" not in json.dumps(sent)
    assert all(m["role"] in ("system", "user", "assistant") for m in sent["messages"])
    if fixture.get("reference_first_answer"):
        assert sent["messages"][1] == {"role": "assistant", "content": "ok"}
