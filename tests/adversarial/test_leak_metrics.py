"""A client cannot choose the metrics' model labels: they are the names the config gives
(a fleet's served names and aliases, model_access, rate_limits.models, the policy's model
overlays); any other name, however many and whoever sends them first, counts as
``(other)``, and the real models keep their own series."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.observe.metrics import OTHER
from tests.support.bodies import CHAT, MESSAGES
from tests.support.fleet import fleet_settings
from tests.support.gateways import MockEngine, asgi_client, canned
from tests.support.metrics import Scrape

pytestmark = pytest.mark.anyio
REQUESTS = "ft_gateway_requests_total"


def unlisted(request: httpx.Request) -> httpx.Response:
    """An engine with no model list."""
    return httpx.Response(404, json={"error": "no such route"})


def _fleet() -> Any:
    deployment = {
        "name": "chat",
        "upstream": {"url": "http://127.0.0.1:9"},
        "models": ["real-model"],
        "aliases": {"friendly": "real-model"},
    }
    return fleet_settings([deployment], overrides={("log", "requests"): False})


async def test_junk_model_names_first_never_push_the_real_model_out() -> None:
    app = create_app(_fleet(), transport=httpx.MockTransport(canned))
    async with asgi_client(app) as client:
        for i in range(200):  # past any cap, before the real model is ever asked for
            await client.post(CHAT, json={"model": f"junk-{i}", "messages": MESSAGES})
        for model in ("real-model", "friendly"):
            answer = await client.post(CHAT, json={"model": model, "messages": MESSAGES})
            assert answer.status_code == 200
        scrape = Scrape((await client.get("/metrics")).text)
    models = {dict(k)["model"] for k in scrape.labelled(REQUESTS)}
    assert models == {"real-model", "friendly", OTHER}, models
    assert scrape(REQUESTS, route=CHAT, model="real-model", status="200") == 1
    assert scrape(REQUESTS, route=CHAT, model="friendly", status="200") == 1
    assert scrape(REQUESTS, route=CHAT, model=OTHER, status="404") == 200


async def test_a_single_deployment_labels_only_the_names_its_config_gives() -> None:
    # One deployment: model_access and rate_limits.models name the models.
    settings = fleet_settings(
        [],
        overrides={
            ("log", "requests"): False,
            ("model_access",): {"keys": {"nobody": ["named-by-access"]}},
        },
    )
    # An engine that lists no models: each name passes to it (gateway/fleet/served.py).
    app = create_app(settings, transport=httpx.MockTransport(MockEngine(models=unlisted)))
    async with asgi_client(app) as client:
        for model in ("named-by-access", "anything-else", "x" * 80):
            await client.post(CHAT, json={"model": model, "messages": MESSAGES})
        scrape = Scrape((await client.get("/metrics")).text)
    models = {dict(k)["model"] for k in scrape.labelled(REQUESTS)}
    assert models == {"named-by-access", OTHER}, models
    assert scrape(REQUESTS, route=CHAT, model=OTHER, status="200") == 2
