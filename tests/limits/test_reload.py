"""Rate limits reload with the policy (SIGHUP): read again from the config file the
gateway started with; invalid limits, or a change that takes a restart, are refused
and the live ones stay."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.settings import load_settings
from tests.support.bodies import CHAT, chat
from tests.support.gateways import asgi_client, gateway_settings
from tests.support.limits import auth, write_config

pytestmark = pytest.mark.anyio


def canned(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200, json={"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    )


async def limit_header(client: httpx.AsyncClient) -> str | None:
    answer = await client.post(CHAT, json=chat(max_tokens=1), headers=auth("alice"))
    value: str | None = answer.headers.get("x-ratelimit-limit-requests")
    return value


async def test_sighup_reloads_the_limits_from_the_config_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def limits(rpm: int, **more: Any) -> dict[str, Any]:
        return {"default": {"requests_per_minute": rpm}, **more}

    path = write_config(tmp_path, "http://engine", limits(10))
    settings = load_settings(path, environ={})
    app = create_app(settings, transport=httpx.MockTransport(canned))
    async with asgi_client(app) as client:
        assert await limit_header(client) == "10"
        write_config(tmp_path, "http://engine", limits(20))
        await app.state.reloader.reload("SIGHUP")
        assert await limit_header(client) == "20"
        with caplog.at_level(logging.WARNING, logger="gateway.reload"):
            # A key no API key has: refused, the live limits stay.
            write_config(tmp_path, "http://engine", limits(30, keys={"nobody": {}}))
            result = await app.state.reloader.reload("SIGHUP")
            assert result.result == "failed"
            assert "rate_limits.keys.nobody: no API key is named 'nobody'" in result.error
            assert await limit_header(client) == "20"
            # The store changes only with a restart: the whole reload is refused.
            write_config(tmp_path, "http://engine", limits(40, store="redis"))
            result = await app.state.reloader.reload("SIGHUP")
            assert result.result == "failed"
            assert "rate_limits.store: changes only with a restart" in result.error
            assert await limit_header(client) == "20"
            assert app.state.gateway.limiter.store.kind == "local"
            # No limits any more: every request passes, without headers.
            write_config(tmp_path, "http://engine", {})
            result = await app.state.reloader.reload("SIGHUP")
            assert (result.result, result.changed) == ("loaded", ("rate limits",))
            assert await limit_header(client) is None
    # The warnings alone: whether info lines show depends on the log levels a test inherits.
    messages = [
        r.message
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name == "gateway.reload"
    ]
    assert messages == ["reload failed; the live policy, API keys and rate limits stay"] * 2


async def test_limits_off_at_start_need_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path, "http://engine", {})
    app = create_app(load_settings(path, environ={}), transport=httpx.MockTransport(canned))
    async with asgi_client(app) as client:
        write_config(tmp_path, "http://engine", {"default": {"requests_per_minute": 1}})
        result = await app.state.reloader.reload("SIGHUP")
        assert result.result == "failed"
        assert "rate limits were off at start: turning them on takes a restart" in result.error
        assert await limit_header(client) is None
    # Settings with no config file (the tests' own): nothing to read again.
    app = create_app(gateway_settings("http://engine"), transport=httpx.MockTransport(canned))
    async with asgi_client(app):
        await app.state.reloader.reload("SIGHUP")
