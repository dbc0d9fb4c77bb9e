"""Security review, as tests: what reaches the engine, what reaches the client,
what reaches the logs. (Redirects, size limits, smuggling and header floods are
in test_engine_faults.py and serving/test_client_faults.py.) The ``fake_engine`` and the
``gateway`` (with this module's ``settings``) are tests/support/fixtures.py's."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import anyio
import httpx
import pytest

from gateway.observe.exchange import Observers
from gateway.observe.logs import AccessLog
from gateway.proxy import route as proxy
from gateway.settings import Settings
from tests.support.bodies import CHAT, ERROR_KEYS, chat
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE, keyed_fault_settings
from tests.support.gateways import Gateway

pytestmark = pytest.mark.anyio
CLIENT_KEY = "sk-client-secret-4f1d2c3b"
ENGINE_KEY = "sk-engine-secret-9a8b7c6d"
PROMPT = "PROMPT-SECRET: my card number is 4111 1111 1111 1111"


@pytest.fixture
def settings(fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return keyed_fault_settings(
        fake_engine.url, monkeypatch, engine_key=ENGINE_KEY, client_key=CLIENT_KEY
    )


HOSTILE_HEADERS = {
    "authorization": f"Bearer {CLIENT_KEY}",
    "proxy-authorization": "Basic c2VjcmV0OnNlY3JldA==",
    "cookie": "session=secret-cookie",
    "connection": "keep-alive, x-hop-by-name",
    "x-hop-by-name": "must not pass: named by Connection",
    "keep-alive": "timeout=5",
    "te": "trailers",
    "trailer": "x-late",
    "proxy-connection": "keep-alive",
    "x-api-key": CLIENT_KEY,  # credential-like: never forwarded (docs/headers.md)
    "x-forwarded-for": "10.9.8.7",  # a claimed address: never forwarded
    "x-custom-thing": "kept",  # an ordinary end-to-end header, for contrast
}


async def test_hop_by_hop_headers_and_client_credentials_never_reach_the_engine(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url) as client:
        response = await client.post(
            CHAT, json=chat(), headers={**HOSTILE_HEADERS, "x-request-id": "sec-1"}
        )
    assert response.status_code == 200
    seen = await fake_engine.wait_for_request("sec-1")
    names = {name for name, _ in seen.headers}
    for name in HOSTILE_HEADERS.keys() - {"authorization", "connection", "x-custom-thing"}:
        assert name.encode() not in names, name
    # The upstream client may say Connection for its own connection, never the client's.
    assert seen.header(b"connection") in (None, b"keep-alive")
    assert CLIENT_KEY.encode() not in b"".join(v for _, v in seen.headers)
    assert seen.header(b"authorization") == f"Bearer {ENGINE_KEY}".encode()  # the engine's own
    assert seen.header(b"host") == fake_engine.url.removeprefix("http://").encode()
    assert seen.header(b"x-custom-thing") == b"kept"
    assert seen.header(b"content-length") == str(len(seen.body)).encode()
    assert seen.header(b"transfer-encoding") is None


async def test_engine_key_never_reaches_the_client(gateway: Gateway) -> None:
    auth = {"authorization": f"Bearer {CLIENT_KEY}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=auth) as client:
        for mode in ("ok", "html500", "leak400", "hang", "cut"):
            response = await client.post(
                CHAT, json=chat(stream=mode == "cut"), headers={"x-bad-mode": mode}
            )
            assert ENGINE_KEY not in response.text
            assert ENGINE_KEY not in str(response.headers)


@pytest.mark.parametrize("mode", ["html500", "leak400"])
async def test_error_bodies_never_carry_engine_internals(gateway: Gateway, mode: str) -> None:
    auth = {"authorization": f"Bearer {CLIENT_KEY}", "x-bad-mode": mode}
    async with httpx.AsyncClient(base_url=gateway.url) as client:
        response = await client.post(CHAT, json=chat(), headers=auth)
    assert response.status_code in (400, 500)
    error = response.json()["error"]
    assert set(error) == ERROR_KEYS
    for leak in ("Traceback", "/srv/engine", "10.12.0.7", "server.py", "<html"):
        assert leak not in response.text


async def test_gateway_failure_body_carries_no_traceback(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("internal detail /opt/gateway/policy.py")

    monkeypatch.setattr(proxy, "apply_policy", broken)
    auth = {"authorization": f"Bearer {CLIENT_KEY}"}
    async with httpx.AsyncClient(base_url=gateway.url) as client:
        response = await client.post(CHAT, json=chat(), headers=auth)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "internal detail" not in response.text and "Traceback" not in response.text


@pytest.fixture
def every_log_line() -> Iterator[list[str]]:
    """Every record any logger emits, formatted with its traceback, at DEBUG."""
    lines: list[str] = []
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(formatter.format(record))

    handler = Collect(logging.DEBUG)
    loggers = [logging.getLogger()] + [
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
    ]
    levels = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        for lg, level in levels:
            lg.removeHandler(handler)
            lg.setLevel(level)


async def test_logs_carry_neither_prompts_nor_keys(
    fake_engine: FakeEngine,
    gateway: Gateway,
    every_log_line: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The access log (an Observer writing to stdout) in both formats, beside logging.
    access_json, access_text = io.BytesIO(), io.BytesIO()
    gateway.app.state.gateway.observer = Observers(
        gateway.recorder,
        AccessLog(access_json, format="json"),
        AccessLog(access_text, format="text"),
    )
    secret = chat(messages=[{"role": "user", "content": PROMPT}])
    good = {"authorization": f"Bearer {CLIENT_KEY}"}
    wrong = {"authorization": f"Bearer {CLIENT_KEY}-but-wrong"}
    with anyio.fail_after(DEADLINE * 2):
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            statuses = [
                (await client.post(CHAT, json=secret, headers=good)).status_code,
                (
                    await client.post(CHAT, json={**secret, "logit_bias": {"1": 5}}, headers=good)
                ).status_code,
                (await client.post(CHAT, json={**secret, "x": PROMPT}, headers=good)).status_code,
                (await client.post(CHAT, json=secret, headers=wrong)).status_code,
                (await client.post(CHAT, content=PROMPT[:30], headers=good)).status_code,
            ]
            for mode in ("html500", "leak400", "hang", "garbage"):
                headers = {**good, "x-bad-mode": mode}
                statuses.append((await client.post(CHAT, json=secret, headers=headers)).status_code)
            for mode in ("cut", "badsse", "stall"):
                headers = {**good, "x-bad-mode": mode}
                statuses.append(
                    (
                        await client.post(CHAT, json={**secret, "stream": True}, headers=headers)
                    ).status_code
                )

            def broken(*args: object, **kwargs: object) -> None:
                raise RuntimeError("boom")

            monkeypatch.setattr(proxy, "apply_policy", broken)
            statuses.append((await client.post(CHAT, json=secret, headers=good)).status_code)
    assert statuses == [200, 400, 400, 401, 400, 500, 400, 504, 502, 200, 200, 200, 500]
    assert any("unexpected error" in line for line in every_log_line)  # the capture works
    assert access_json.getvalue().count(b"\n") == len(statuses)  # one line per request
    text = "\n".join(every_log_line)
    text += access_json.getvalue().decode() + access_text.getvalue().decode()
    assert CLIENT_KEY not in text and ENGINE_KEY not in text
    assert "PROMPT-SECRET" not in text and "4111 1111" not in text
