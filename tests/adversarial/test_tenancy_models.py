"""A key limited to models, and the model names of one deployment (issue 33, item 6).

With one deployment, ``GET /v1/models`` listed the engine's every model to a key
limited to some, ``/tokenize`` and ``/detokenize`` without a model skipped the key's
check, and any ``model`` passed: an engine that ignores the name (the probe finds
llama.cpp, TEI, SGLang single-model do) answered a client asking for another model
with its own. Now the deployment's names are ``upstream.models`` or, unset, those the
engine lists, and any other is the fleet's 404.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import ANSWER, CHAT, MESSAGES
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.limits import auth, write_keys

SERVED = ["served-a", "served-b", "served-c"]


def _listing(request: httpx.Request) -> httpx.Response:
    """An engine that lists SERVED and answers any model with its own (as llama.cpp)."""
    if request.url.path == "/v1/models":
        data = [{"id": name, "object": "model", "owned_by": "engine"} for name in SERVED]
        return httpx.Response(200, json={"object": "list", "data": data})
    if request.url.path == "/tokenize":
        return httpx.Response(200, json={"tokens": [1, 2], "count": 2})
    return httpx.Response(200, json=ANSWER)


def _unlisted(request: httpx.Request) -> httpx.Response:
    """An engine with no model list."""
    if request.url.path == "/v1/models":
        return httpx.Response(404, json={"error": "Not Found"})
    return httpx.Response(200, json=ANSWER)


def _app(tmp_path: Path, engine: MockEngine, **overrides: Any) -> Any:
    keys = write_keys(tmp_path, {"alice": None, "bob": None})
    flags: dict[tuple[str, ...], Any] = {
        ("auth", "keys_file"): str(keys),
        ("model_access",): {"keys": {"alice": ["served-a"]}},
    }
    flags |= {tuple(k.split(".")): v for k, v in overrides.items()}
    settings = gateway_settings("http://engine", overrides=flags)
    return create_app(settings, transport=httpx.MockTransport(engine))


def _asked(engine: MockEngine, path: str) -> int:
    return sum(r.url.path == path for r in (*engine.requests, *engine.own))


@pytest.mark.anyio
async def test_a_limited_keys_model_list_shows_only_its_models(tmp_path: Path) -> None:
    engine = MockEngine(_listing, models=_listing)
    async with asgi_client(_app(tmp_path, engine)) as client:
        alice = await client.get("/v1/models", headers=auth("alice"))
        bob = await client.get("/v1/models", headers=auth("bob"))
    assert [m["id"] for m in alice.json()["data"]] == ["served-a"]
    assert alice.json()["object"] == "list"
    assert [m["id"] for m in bob.json()["data"]] == SERVED  # not limited: the engine's


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/tokenize", "/detokenize"])
async def test_a_limited_key_must_name_its_model_to_tokenize(tmp_path: Path, path: str) -> None:
    engine = MockEngine(_listing, models=_listing)
    body: dict[str, Any] = {"prompt": "hi"} if path == "/tokenize" else {"tokens": [1, 2]}
    async with asgi_client(_app(tmp_path, engine)) as client:
        unnamed = await client.post(path, json=body, headers=auth("alice"))
        other = await client.post(path, json={**body, "model": "served-b"}, headers=auth("alice"))
        own = await client.post(path, json={**body, "model": "served-a"}, headers=auth("alice"))
        free = await client.post(path, json=body, headers=auth("bob"))
    assert unnamed.status_code == 400
    assert unnamed.json()["error"]["code"] == "missing_required_parameter"
    assert unnamed.json()["error"]["param"] == "model"
    assert other.status_code == 404 and other.json()["error"]["code"] == "model_not_found"
    assert own.status_code == 200 and free.status_code == 200
    assert _asked(engine, path) == 2


@pytest.mark.anyio
async def test_a_name_the_engine_does_not_list_is_refused_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.fleet.served.REFRESH", 1e9)  # read once in this test
    engine = MockEngine(_listing, models=_listing)
    async with asgi_client(_app(tmp_path, engine)) as client:
        answers = [
            await client.post(CHAT, json={"model": m, "messages": MESSAGES}, headers=auth("bob"))
            for m in ("served-b", "gpt-4o", "served-c", "served-b ", "gpt-4o")
        ]
    assert [a.status_code for a in answers] == [200, 404, 200, 404, 404]
    error = answers[1].json()["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "gpt-4o" in error["message"]
    assert _asked(engine, CHAT) == 2
    assert _asked(engine, "/v1/models") == 1  # read at the first request, not per miss


@pytest.mark.anyio
async def test_a_miss_reads_the_engines_list_again_when_it_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.fleet.served.REFRESH", 0.0)  # due at every miss
    engine = MockEngine(_listing, models=_listing)
    async with asgi_client(_app(tmp_path, engine)) as client:
        before = await client.post(
            CHAT, json={"model": "new", "messages": MESSAGES}, headers=auth("bob")
        )
        SERVED.append("new")
        try:
            after = await client.post(
                CHAT, json={"model": "new", "messages": MESSAGES}, headers=auth("bob")
            )
        finally:
            SERVED.remove("new")
    assert (before.status_code, after.status_code) == (404, 200)


@pytest.mark.anyio
async def test_configured_names_are_the_deployments_and_its_model_list(tmp_path: Path) -> None:
    engine = MockEngine(_listing, models=_listing)
    app = _app(tmp_path, engine, **{"upstream.models": ["my-model", "served-a"]})
    async with asgi_client(app) as client:
        mine = await client.post(
            CHAT, json={"model": "my-model", "messages": MESSAGES}, headers=auth("bob")
        )
        listed = await client.post(
            CHAT, json={"model": "served-b", "messages": MESSAGES}, headers=auth("bob")
        )
        models = (await client.get("/v1/models", headers=auth("bob"))).json()
        alice = (await client.get("/v1/models", headers=auth("alice"))).json()
        card = await client.get("/v1/models/my-model", headers=auth("bob"))
    assert (mine.status_code, listed.status_code) == (200, 404)
    assert [m["id"] for m in models["data"]] == ["my-model", "served-a"]
    assert [m["id"] for m in alice["data"]] == ["served-a"]
    assert card.status_code == 200 and card.json()["id"] == "my-model"
    assert _asked(engine, "/v1/models") == 0  # configured: the engine is not asked


@pytest.mark.anyio
async def test_an_engine_with_no_list_decides_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = MockEngine(_unlisted, models=_unlisted)
    with caplog.at_level(logging.WARNING, logger="gateway"):
        async with asgi_client(_app(tmp_path, engine)) as client:
            answers = [
                await client.post(
                    CHAT, json={"model": m, "messages": MESSAGES}, headers=auth("bob")
                )
                for m in ("anything", "else")
            ]
    assert [a.status_code for a in answers] == [200, 200]
    said = [r for r in caplog.records if "did not list its models" in r.getMessage()]
    assert len(said) == 1 and "upstream.models" in said[0].getMessage()


def test_a_fleets_deployment_names_its_models_beside_its_upstream(tmp_path: Path) -> None:
    deployment = {"name": "d", "upstream": {"url": "http://e", "models": ["x"]}, "models": ["x"]}
    with pytest.raises(Exception, match="not upstream.models"):
        gateway_settings(overrides={("deployments",): [deployment]})
