"""A request to a path the gateway does not serve (or with a method it does not take) is
logged and counted like any answer, under one route label for all such paths; and the
Responses routes are logged and counted under their own route names."""

from __future__ import annotations

import json

import pytest

from gateway.app.factory import create_app
from gateway.observe.exchange import UNSERVED
from gateway.observe.metrics import OTHER
from tests.support.gateways import MockEngine, asgi_client
from tests.support.metrics import Scrape
from tests.support.responses import RESPONSES, responses_request, store_settings

pytestmark = pytest.mark.anyio


async def test_an_unserved_path_is_logged_and_counted(
    engine: MockEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(store_settings(), transport=engine.transport)
    async with asgi_client(app) as client:
        capsys.readouterr()
        missing = await client.post("/v1/assistants", json={}, headers={"x-request-id": "r-404"})
        wrong = await client.get("/v1/chat/completions")
        for n in range(3):
            await client.get(f"/v1/assistants/asst_{n}")  # (/v1/files is served: batches)
        made = (await client.post(RESPONSES, json=responses_request())).json()
        await client.get(f"{RESPONSES}/{made['id']}")
        await client.get(f"{RESPONSES}/resp_nope/input_items")
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        scrape = Scrape((await client.get("/metrics")).text)
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "r-404"
    assert missing.json()["error"]["code"] == "unknown_url"
    assert wrong.status_code == 405
    first = records[0]
    assert {k: first[k] for k in ("request_id", "method", "path", "status", "policy", "error")} == {
        "request_id": "r-404",
        "method": "POST",
        "path": "/v1/assistants",
        "status": 404,
        "policy": None,
        "error": "unknown_url",
    }
    assert first["bytes_out"] == len(missing.content)
    assert [r["status"] for r in records] == [404, 405, 404, 404, 404, 200, 200, 404]
    assert records[6]["path"] == f"{RESPONSES}/{made['id']}" and records[6]["policy"] is None
    count = "ft_gateway_requests_total"
    assert scrape(count, route=UNSERVED, model="", status="404") == 4
    assert scrape(count, route=UNSERVED, model="", status="405") == 1
    assert scrape.total(count, route=RESPONSES) == 1
    assert (
        # (OTHER: the config names no model, so none is a label: observe/modelnames.py)
        scrape(count, route="/v1/responses/{response_id}", model=OTHER, status="200") == 1
    )
    assert (
        scrape(count, route="/v1/responses/{response_id}/input_items", model="", status="404") == 1
    )
    # No path the client chose became a label.
    assert not any("file_" in dict(labels).get("route", "") for labels in scrape.labelled(count))
