"""An engine's response head is bounded: past ``limits.max_response_header_bytes`` bytes
or ``limits.max_response_headers`` lines the gateway stops reading, closes the
connection and answers a 502 ``upstream_header_too_large``; the gateway's memory stays
bounded by the limit, not by what the engine sends.

The engine is the raw-socket one of tests/support (rawengine.py's handlers); how much of
an endless head the gateway took is what the engine managed to send before the gateway
closed the connection (the limit, one read and the sockets' buffers), against what it
would have sent to a gateway that kept reading.
"""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from gateway.settings import Settings
from tests.support.bodies import CHAT, chat, completion, openai_error
from tests.support.engine import FakeEngine, chunk
from tests.support.faults import DEADLINE, fault_settings
from tests.support.gateways import Gateway
from tests.support.rawengine import answers_own, header_flood, with_headers

pytestmark = pytest.mark.anyio
FLOOD = 64 << 20  # what the engine would send: far past any socket buffer
TOO_LARGE = "upstream_header_too_large"


@pytest.fixture
def settings(fake_engine: FakeEngine, upstream_client: str) -> Settings:
    return fault_settings(fake_engine.url, client=upstream_client)


def asking(who: str) -> dict[str, object]:
    return chat(messages=[{"role": "user", "content": who}])


FLOODS = {
    "endless-header-lines": {"line": b"x-flood: " + b"a" * 1000 + b"\r\n"},
    "one-endless-value": {"first": b"x-flood: ", "line": b"a" * 1024},
}


@pytest.mark.parametrize("flood", list(FLOODS.values()), ids=list(FLOODS))
async def test_an_endless_head_is_cut_at_the_limit(
    fake_engine: FakeEngine, gateway: Gateway, flood: dict[str, bytes]
) -> None:
    fake_engine.handler = header_flood(total=FLOOD, **flood)
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            response = await client.post(CHAT, json=asking("alice"))
            seen = fake_engine.requests[0]
            await seen.connection.closed.wait()
            fake_engine.handler = answers_own
            after = await client.post(CHAT, json=asking("bob"))
    error = openai_error(response, 502, code=TOO_LARGE)
    assert "65536 bytes" in error["message"]
    # The gateway closed the connection near the limit (64 KiB): what the engine got out
    # is that plus the sockets' buffers, never the flood.
    assert seen.sent < FLOOD // 4, seen.sent
    assert after.status_code == 200


async def test_too_many_header_lines_are_refused(fake_engine: FakeEngine, gateway: Gateway) -> None:
    fake_engine.handler = with_headers([(b"x-h", b"1")] * 200)  # 1.6 KB: within the bytes
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            response = await client.post(CHAT, json=asking("alice"))
            streamed = await client.post(CHAT, json={**asking("alice"), "stream": True})
    error = openai_error(response, 502, code=TOO_LARGE)
    assert "100 header lines" in error["message"]
    openai_error(streamed, 502, code=TOO_LARGE)


async def test_a_head_within_the_limits_is_answered(
    fake_engine: FakeEngine, gateway: Gateway
) -> None:
    # 90 lines and about 60 KiB: under both limits (100 lines, 64 KiB).
    fake_engine.handler = with_headers([(b"x-h", b"v" * 680)] * 88)
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            response = await client.post(CHAT, json=asking("alice"))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "alice"


async def test_endless_trailers_are_cut_at_the_heads_limit(
    fake_engine: FakeEngine, gateway: Gateway, upstream_client: str
) -> None:
    # A chunked answer whose last chunk is followed by trailer lines without end: the
    # answer is not over until they end, so they are bounded as a head is (they were
    # kept without a limit), and none becomes a header of the client's answer.
    body = json.dumps(completion("alice")).encode()
    head = b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    first = head + chunk(body) + b"0\r\n"
    fake_engine.handler = header_flood(
        first=first, line=b"x-trailer: " + b"t" * 1000 + b"\r\n", total=FLOOD
    )
    with anyio.fail_after(DEADLINE):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=DEADLINE) as client:
            response = await client.post(CHAT, json=asking("alice"))
            seen = fake_engine.requests[0]
            await seen.connection.closed.wait()
    # (httpx's h11 refuses them past its own limit on an unfinished event and closes.)
    code = "upstream_protocol_error" if upstream_client == "httpx" else TOO_LARGE
    openai_error(response, 502, code=code)
    assert seen.sent < FLOOD // 4, seen.sent
