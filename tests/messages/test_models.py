"""GET /v1/models in Anthropic's shape for a request that carries anthropic-version: the
single deployment's engine list reshaped, a fleet's table (Claude model names aliased onto
local models, as Claude Code sends them), Anthropic's paging, its 404."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from gateway.app.factory import create_app
from gateway.messages.models import model_page
from tests.support.anthropic import (
    ANTHROPIC_VERSION,
    MESSAGES_PATH,
    anthropic_error,
    messages_request,
)
from tests.support.fleet import SeenEngine, deployment, fleet_settings, running_engines
from tests.support.gateways import MockEngine, asgi_client, gateway_settings, serve_gateway

pytestmark = pytest.mark.anyio
CARDS = [{"id": f"m{i}", "object": "model", "created": 1767225600 + i} for i in range(5)]


@pytest.mark.parametrize(
    ("query", "ids", "more"),
    [
        (b"", ["m0", "m1", "m2", "m3", "m4"], False),
        (b"limit=2", ["m0", "m1"], True),
        (b"limit=2&after_id=m1", ["m2", "m3"], True),
        (b"limit=2&after_id=m3", ["m4"], False),
        (b"limit=2&before_id=m3", ["m1", "m2"], True),
        (b"limit=2&before_id=m2", ["m0", "m1"], False),
        (b"limit=1000", ["m0", "m1", "m2", "m3", "m4"], False),
    ],
)
def test_pages_as_anthropics(query: bytes, ids: list[str], more: bool) -> None:
    page = model_page(CARDS, query)
    assert [c["id"] for c in page["data"]] == ids
    assert (page["has_more"], page["first_id"], page["last_id"]) == (more, ids[0], ids[-1])
    assert page["data"][0] == {
        "type": "model",
        "id": ids[0],
        "display_name": ids[0],
        "created_at": f"2026-01-01T00:00:0{ids[0][1]}Z",
    }


async def test_the_single_deployments_list_reshaped_and_openais_unchanged() -> None:
    def listed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "list", "data": CARDS})

    engine = MockEngine(listed)
    app = create_app(gateway_settings(), transport=engine.transport)
    async with asgi_client(app) as client:
        ours = await client.get("/v1/models?limit=3", headers=ANTHROPIC_VERSION)
        theirs = await client.get("/v1/models")
    assert ours.status_code == 200
    assert [c["id"] for c in ours.json()["data"]] == ["m0", "m1", "m2"]
    assert ours.json()["has_more"] is True and ours.headers["request-id"]
    # The page is the gateway's: the engine is asked for its whole list.
    assert engine.requests[0].url.query == b""
    assert theirs.json() == {"object": "list", "data": CARDS}
    bad = await _bad_limit(app)
    anthropic_error(bad, 400, "invalid_request_error")


async def _bad_limit(app: Any) -> httpx.Response:
    async with asgi_client(app) as client:
        return await client.get("/v1/models?limit=0", headers=ANTHROPIC_VERSION)


async def test_a_fleet_routes_claude_names_onto_local_models() -> None:
    engine = SeenEngine("qwen3-coder")
    async with running_engines([engine]):
        aliases = {
            "claude-sonnet-4-6": "qwen3-coder",
            "claude-haiku-4-5": {"to": "qwen3-coder", "hidden": True},
        }
        settings = fleet_settings([deployment("coder", [engine], aliases=aliases)])
        async with (
            serve_gateway(settings) as gw,
            anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-x", max_retries=0) as client,
        ):
            listed = await client.models.list()
            one = await client.models.retrieve("claude-haiku-4-5")
            answer = await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=8,
                messages=[{"role": "user", "content": "hi"}],
            )
            with pytest.raises(anthropic.NotFoundError) as missing:
                await client.messages.create(
                    model="claude-opus-4-8",
                    max_tokens=8,
                    messages=[{"role": "user", "content": "hi"}],
                )
            with pytest.raises(anthropic.NotFoundError):
                await client.models.retrieve("claude-opus-4-8")
            async with httpx.AsyncClient(base_url=gw.url) as raw:
                unknown = await raw.post(MESSAGES_PATH, json=messages_request(model="gpt-9"))
    assert [m.id for m in listed.data] == ["qwen3-coder", "claude-sonnet-4-6"]
    assert one.id == "claude-haiku-4-5" and one.type == "model"
    assert engine.models == ["qwen3-coder"]  # the engine got its own name
    assert answer.model == "qwen3-coder" and answer.content
    assert missing.value.type == "not_found_error" and missing.value.request_id
    assert "claude-opus-4-8" in anthropic_error(unknown, 404, "not_found_error").replace(
        "gpt-9", "claude-opus-4-8"
    )
