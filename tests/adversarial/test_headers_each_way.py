"""What crosses the gateway in headers, each way (docs/headers.md): a client's credentials
in any header or in the query string never reach the engine, nor the addresses a client
claims; an engine's cookies, host names and own headers never reach the client. A real
gateway under uvicorn, the raw-socket engine recording what it got."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from gateway.settings import Settings
from tests.support.bodies import CHAT, chat
from tests.support.echoengine import echo
from tests.support.engine import FakeEngine
from tests.support.faults import fault_settings
from tests.support.gateways import Gateway, serve_gateway

pytestmark = pytest.mark.anyio
SECRET = "sk-client-secret-5e6f7a8b9c0d"
CREDENTIALS = {
    "x-api-key": SECRET,
    "api-key": SECRET,
    "x-goog-api-key": SECRET,
    "ocp-apim-subscription-key": SECRET,
    "x-auth-token": SECRET,
    "cookie": f"session={SECRET}",
    "proxy-authorization": f"Basic {SECRET}",
    "authorization": f"Bearer {SECRET}",
}
ADDRESSES = {
    "x-forwarded-for": "10.9.8.7, 192.168.0.3",
    "forwarded": "for=10.9.8.7;host=internal.corp",
    "x-real-ip": "10.9.8.7",
    "x-forwarded-host": "internal.corp",
}
END_TO_END = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "tools-2024-04-04",
    "openai-organization": "org-1",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "user-agent": "OpenAI/Python 2.0",
    "x-custom-thing": "kept",
}


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(echo) as running:
        yield running


@pytest.fixture
def settings(fake_engine: FakeEngine) -> Settings:
    return fault_settings(fake_engine.url)


async def test_client_credentials_and_claimed_addresses_never_reach_the_engine(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    headers = {**CREDENTIALS, **ADDRESSES, **END_TO_END, "x-request-id": "hdr-1"}
    query = f"api_key={SECRET}&access_token={SECRET}&api-version=2024-06-01&key={SECRET}"
    async with httpx.AsyncClient(base_url=gateway.url) as client:
        response = await client.post(f"{CHAT}?{query}", json=chat(), headers=headers)
    assert response.status_code == 200
    seen = await fake_engine.wait_for_request("hdr-1")
    names = {name.decode() for name, _ in seen.headers}
    assert not names & (CREDENTIALS.keys() - {"authorization"}), names
    assert seen.header(b"authorization") is None  # no engine key configured: none at all
    assert not names & ADDRESSES.keys(), names
    for name, value in END_TO_END.items():
        assert seen.header(name.encode()) == value.encode(), name
    assert SECRET.encode() not in b"".join(v for _, v in seen.headers)
    target = urlsplit(seen.target)
    assert target.path == CHAT
    assert parse_qsl(target.query) == [("api-version", "2024-06-01")]
    assert SECRET not in seen.target


async def test_engine_cookies_hosts_and_own_headers_never_reach_the_client(
    engine: FakeEngine,
) -> None:
    async with serve_gateway(fault_settings(engine.url)) as served:
        async with httpx.AsyncClient(base_url=served.url) as client:
            response = await client.post(
                CHAT, json=chat(), headers={"x-echo": "headers", "x-request-id": "hdr-2"}
            )
    assert response.status_code == 200
    names = set(response.headers.keys())
    # (date: uvicorn's own, for the gateway's answer)
    assert names == {"content-type", "content-length", "retry-after", "x-request-id", "date"}
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-request-id"] == "hdr-2"
    text = str(response.headers)
    for leak in ("engine-session", "svc.cluster.local", "10.12.0.7", "engine-7d9f", "uvicorn"):
        assert leak not in text


async def test_an_engine_error_answer_keeps_only_the_headers_a_client_may_get(
    engine: FakeEngine,
) -> None:
    async with serve_gateway(fault_settings(engine.url)) as served:
        async with httpx.AsyncClient(base_url=served.url) as client:
            response = await client.post(CHAT, json=chat(), headers={"x-echo": "message"})
    assert response.status_code == 400
    names = set(response.headers.keys())
    assert names == {"content-type", "content-length", "x-request-id", "date"}
