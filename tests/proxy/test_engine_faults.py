"""A misbehaving engine behind a real gateway on loopback: every failure gets a
defined answer within the time-outs, and the gateway keeps serving others.

Runs over each upstream client that ``upstream.client`` allows. The ``fake_engine`` and
the ``gateway`` (with this module's ``settings``) are tests/support/fixtures.py's.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import httpx
import openai
import pytest

from gateway.settings import Settings
from tests.support.bodies import CHAT, chat, error_event, openai_error
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE, fault_settings
from tests.support.gateways import Gateway, serve_gateway
from tests.support.sdk import sdk
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    return fault_settings(fake_engine.url, client=upstream_client)


async def healthy_request_succeeds(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, json=chat())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    async with client.stream("POST", CHAT, json=chat(stream=True)) as streamed:
        text = (await streamed.aread()).decode()
    assert text.endswith("data: [DONE]\n\n") and '"error"' not in text


# (mode, extra headers, stream?, expected status, expected code: of the response,
# or of the error event that ends the stream when the status is 200)
CASES = [
    ("close", {}, False, 502, "upstream_protocol_error"),
    ("garbage", {}, False, 502, "upstream_protocol_error"),
    ("hang", {}, False, 504, "upstream_timeout"),
    ("hang", {}, True, 504, "upstream_timeout"),
    ("slow", {"x-bad-delay": "0.2"}, False, 200, None),
    ("slow", {"x-bad-delay": "30"}, False, 504, "upstream_timeout"),
    ("html500", {}, False, 500, "upstream_error"),
    ("html500", {}, True, 500, "upstream_error"),
    ("badjson", {}, False, 502, "upstream_protocol_error"),
    ("wrongtype", {}, False, 502, "upstream_protocol_error"),
    ("wrongtype", {}, True, 502, "upstream_protocol_error"),
    ("notstream", {}, True, 502, "upstream_protocol_error"),
    ("redirect", {}, False, 502, "upstream_protocol_error"),
    ("huge", {}, False, 502, "upstream_protocol_error"),
    ("huge", {}, True, 200, "upstream_protocol_error"),
    ("badsse", {}, True, 200, "upstream_protocol_error"),
    ("cut", {}, True, 200, "upstream_protocol_error"),
    ("reset", {}, True, 200, "upstream_protocol_error"),
    ("stall", {}, True, 200, "upstream_timeout"),
]


@pytest.mark.parametrize(
    ("mode", "headers", "stream", "status", "code"),
    CASES,
    ids=[
        f"{c[0]}-{'stream' if c[2] else 'json'}{'-' + c[1]['x-bad-delay'] if c[1] else ''}"
        for c in CASES
    ],
)
async def test_engine_fault_gets_a_defined_answer_and_others_are_served(
    fake_engine: FakeEngine,
    gateway: Gateway,
    mode: str,
    headers: dict[str, str],
    stream: bool,
    status: int,
    code: str | None,
) -> None:
    request_id = uuid.uuid4().hex
    headers = {"x-bad-mode": mode, "x-request-id": request_id, **headers}
    result: dict[str, Any] = {}
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:

            async def bad() -> None:
                response = await client.post(CHAT, json=chat(stream=stream), headers=headers)
                result["response"] = response

            async with anyio.create_task_group() as tg:
                tg.start_soon(bad)
                # While the engine misbehaves on one request, others are served.
                await fake_engine.wait_for_request(request_id)
                await healthy_request_succeeds(client)
            await healthy_request_succeeds(client)
    response: httpx.Response = result["response"]
    assert response.headers["x-request-id"] == request_id
    if status != 200:
        error = openai_error(response, status, code=code or "")
        assert "Traceback" not in error["message"] and "10.12" not in error["message"]
    elif code is None:
        assert response.json()["choices"][0]["message"]["content"] == "ok"
    else:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert error_event(response.text)["code"] == code


async def test_redirect_is_never_followed_nor_passed_on(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    async with FakeEngine() as trap:
        location = f"{trap.url}/v1/chat/completions"
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            response = await client.post(
                CHAT, json=chat(), headers={"x-bad-mode": "redirect", "x-bad-location": location}
            )
        openai_error(response, 502, code="upstream_protocol_error")
        assert "location" not in response.headers
        assert trap.url not in response.text
        assert trap.requests == [] and trap.connections == []


async def test_engine_refusing_connections_then_coming_back(upstream_client: str) -> None:
    port = free_port()  # nothing listens here yet
    settings = fault_settings(f"http://127.0.0.1:{port}", client=upstream_client)
    with anyio.fail_after(DEADLINE):
        async with serve_gateway(settings) as gw, httpx.AsyncClient(base_url=gw.url) as client:
            response = await client.post(CHAT, json=chat())
            error = openai_error(response, 502, code="upstream_unreachable")
            assert str(port) not in error["message"] and "127.0.0.1" not in response.text
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            assert (await client.get("/healthz")).status_code == 200
            async with FakeEngine(port=port):
                await healthy_request_succeeds(client)
                assert (await client.get("/readyz")).status_code == 200


@pytest.mark.parametrize("mode", ["cut", "stall", "badsse", "reset"])
async def test_openai_sdk_sees_a_broken_stream_as_an_api_error(gateway: Gateway, mode: str) -> None:
    client = sdk(gateway.url, default_headers={"x-bad-mode": mode})
    received: list[str] = []
    with anyio.fail_after(DEADLINE):
        with pytest.raises(openai.APIError) as caught:
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for chunk in stream:
                received.append(chunk.choices[0].delta.content or "")
        await client.close()
    assert received == ["t0"]  # the good event before the failure got through
    assert "upstream" in str(caught.value.body) or "engine" in caught.value.message
