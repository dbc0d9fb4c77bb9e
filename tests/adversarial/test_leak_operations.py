"""What the gateway's own failures tell a client, and what /readyz (no key needed) tells
anyone: a status and a generic reason, never a file path, an address or a library's
error text; the detail is in the gateway's log (and ``ft-gateway reload``'s output)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.app.reload import Reloader
from tests.support.bodies import CHAT, chat
from tests.support.engine import FakeEngine
from tests.support.gateways import Gateway, gateway_settings, serve_gateway
from tests.support.limits import auth, key_of, limited_gateway, write_keys
from tests.support.paths import POLICY
from tests.support.responses import RESPONSES, responses_request, store_settings
from tests.support.servers import free_port, running_server

pytestmark = pytest.mark.anyio


async def test_a_failing_sqlite_store_tells_the_client_neither_its_path_nor_sqlite_s_error(
    fake_engine: FakeEngine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    where = tmp_path / "private-state-dir" / "responses.sqlite3"
    where.mkdir(parents=True)  # a directory where the file should be: it cannot be opened
    app = create_app(store_settings(fake_engine.url, backend="sqlite", path=str(where)))
    with caplog.at_level(logging.WARNING, logger="gateway"):
        async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
            response = await client.post(RESPONSES, json=responses_request())
            previous = {"previous_response_id": "resp_0123"}
            follow = await client.post(RESPONSES, json=responses_request(**previous))
            stored = await client.get(f"{RESPONSES}/resp_0123")
    for answer in (response, follow, stored):
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "store_unavailable"
        for leak in (str(tmp_path), "private-state-dir", "sqlite3", "unable to open", "SQLite"):
            assert leak not in answer.text, (leak, answer.text)
    # The operator still learns where and why, from the log.
    logged = "\n".join(r.getMessage() + str(r.__dict__.get("error", "")) for r in caplog.records)
    assert str(where) in "\n".join(str(r.__dict__) for r in caplog.records), logged
    assert "Is a directory" in logged


@pytest.fixture
async def served(tmp_path: Path, fake_engine: FakeEngine) -> AsyncIterator[Gateway]:
    keys = write_keys(tmp_path, {"alice": None})
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.read_text())
    settings = gateway_settings(
        fake_engine.url, policy=policy, overrides={("auth", "keys_file"): str(keys)}
    )
    async with serve_gateway(settings) as gateway:
        yield gateway


async def test_readyz_shows_no_path_and_no_reload_error_text(
    served: Gateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "keys.yaml").write_text("keys:\n  - {name: alice, sha256: not-a-hash}\n")
    reloader: Reloader = served.app.state.reloader
    with caplog.at_level(logging.ERROR, logger="gateway"):
        result = await reloader.reload("SIGHUP")
    assert result is not None and result.result == "failed"
    bearer = {"authorization": f"Bearer {key_of('alice')}"}
    async with httpx.AsyncClient(base_url=served.url) as client:
        answers = [await client.get("/readyz"), await client.get("/readyz", headers=bearer)]
    for ready in answers:
        assert ready.status_code == 200
        body = ready.json()
        last = body["policy"]["last_reload"]
        assert last["result"] == "failed" and last["trigger"] == "SIGHUP"
        assert isinstance(last["error"], str) and last["error"]
        assert "path" not in body["policy"]
        for leak in (str(tmp_path), "keys.yaml", "policy.yaml", "not-a-hash", "64 hex"):
            assert leak not in ready.text, (leak, ready.text)
    # The detail is the operator's: in the log, and in the reload's own result (which
    # ``ft-gateway reload`` prints from the status files).
    assert result.error is not None and "keys.yaml" in result.error
    assert any("keys.yaml" in str(r.__dict__.get("error")) for r in caplog.records)


async def test_readyz_names_no_address_of_a_failing_rate_limit_store(tmp_path: Path) -> None:
    port = free_port()  # nothing listens: every call to Redis is refused
    limits = {
        "default": {"requests_per_minute": 3},
        "store": "redis",
        "redis": {"url": f"redis://127.0.0.1:{port}/0", "on_failure": "fail_open"},
    }
    async with limited_gateway(tmp_path, limits) as client:
        await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice"))
        ready = await client.get("/readyz")
    status = ready.json()["rate_limits"]
    assert status["state"] == "down" and status["errors"] >= 1
    assert status["last_error"]  # what kind of failure, for the dashboard
    assert str(port) not in ready.text and "127.0.0.1" not in ready.text, ready.text
