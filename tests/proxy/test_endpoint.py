"""The proxy against a mocked engine (httpx.MockTransport injected through the factory)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.settings import Settings
from tests.support.bodies import (
    ANSWER,
    CHAT,
    MESSAGES,
    MODEL,
    chat,
    error_event,
    openai_error,
    sse_events,
    without_fingerprint,
)
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.requestids import engine_id


@pytest.fixture
def settings() -> Settings:
    return gateway_settings(environ={"FT_GATEWAY_LIMITS__MAX_BODY_BYTES": "4096"})


@pytest.fixture
async def client(settings: Settings, engine: MockEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, transport=engine.transport)) as c:
        yield c


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"n": 9}, "n"),  # above the fan-out's maximum (8)
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"unknown_thing": 1}, "unknown_thing"),
    ],
)
async def test_rejected_request_never_reaches_the_engine(
    client: httpx.AsyncClient, engine: MockEngine, fields: dict[str, Any], param: str
) -> None:
    response = await client.post(CHAT, json=chat(**fields))
    openai_error(response, 400, param=param, type="invalid_request_error")
    assert engine.requests == []


@pytest.mark.anyio
async def test_unchanged_body_is_forwarded_byte_for_byte(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    raw = b'{"model": "m",   "messages": [{"role":"user","content":"hi"}], "n": 1, "seed": 1234}'
    response = await client.post(CHAT, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert json.loads(without_fingerprint(response.content)) == ANSWER
    assert engine.requests[0].content == raw


@pytest.mark.anyio
async def test_seed_reaches_the_engine_unchanged(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    for seed in (1234, -1, 2**63 - 1, -(2**63)):
        await client.post(CHAT, json=chat(seed=seed, temperature=1.0))
    assert [json.loads(r.content)["seed"] for r in engine.requests] == [
        1234,
        -1,
        2**63 - 1,
        -(2**63),
    ]


@pytest.mark.anyio
async def test_changed_body_is_reserialised(client: httpx.AsyncClient, engine: MockEngine) -> None:
    response = await client.post(CHAT, json=chat(max_completion_tokens=9, user="u"))
    assert response.status_code == 200
    forwarded = json.loads(engine.requests[0].content)
    assert forwarded == {"model": MODEL, "messages": MESSAGES, "max_tokens": 9}
    assert engine.requests[0].headers["content-length"] == str(len(engine.requests[0].content))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "invalid_json"),
        (b"[1, 2]", {"content-type": "application/json"}, 400, "invalid_json"),
        (b'"text"', {"content-type": "application/json"}, 400, "invalid_json"),
        (b"", {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"a": NaN}', {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"a": 1e400}', {"content-type": "application/json"}, 400, "invalid_json"),
        (b"model=m", {"content-type": "application/x-www-form-urlencoded"}, 415, None),
        (b'{"model": "' + b"x" * 5000 + b'"}', {"content-type": "application/json"}, 413, None),
    ],
)
async def test_bad_bodies_get_clear_errors(
    client: httpx.AsyncClient,
    engine: MockEngine,
    content: bytes,
    headers: dict[str, str],
    status: int,
    code: str | None,
) -> None:
    response = await client.post(CHAT, content=content, headers=headers)
    openai_error(response, status)
    if code is not None:
        assert response.json()["error"]["code"] == code
    assert engine.requests == []


@pytest.mark.anyio
async def test_body_over_limit_without_content_length(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 1000

    response = await client.post(
        CHAT, content=chunks(), headers={"content-type": "application/json"}
    )
    openai_error(response, 413)
    assert engine.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
        (httpx.ConnectTimeout("slow"), 502, "upstream_unreachable"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
        (httpx.RemoteProtocolError("bye"), 502, "upstream_protocol_error"),
    ],
)
async def test_engine_failures_map_to_gateway_errors(
    client: httpx.AsyncClient, engine: MockEngine, exc: Exception, status: int, code: str
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exc

    engine.handler = fail
    response = await client.post(CHAT, json=chat())
    openai_error(response, status, code=code)
    assert "refused" not in response.text and "127.0.0.1" not in response.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        # vLLM: integer code
        (
            400,
            {"error": {"message": "bad", "type": "BadRequestError", "param": None, "code": 400}},
            {"message": "bad", "type": "invalid_request_error", "param": None, "code": None},
        ),
        # SGLang: flat
        (
            400,
            {"object": "error", "message": "too long", "type": "BadRequestError", "code": 400},
            {"message": "too long", "type": "invalid_request_error", "param": None, "code": None},
        ),
        # already OpenAI-shaped: kept
        (
            404,
            {
                "error": {
                    "message": "no model",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": "model_not_found",
                }
            },
            {
                "message": "no model",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            },
        ),
    ],
)
async def test_engine_error_bodies_are_normalised(
    client: httpx.AsyncClient,
    engine: MockEngine,
    status: int,
    body: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    engine.handler = lambda request: httpx.Response(status, json=body)
    response = await client.post(CHAT, json=chat())
    assert response.status_code == status
    assert response.json() == {"error": expected}


@pytest.mark.anyio
async def test_engine_html_500_hides_internals(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    engine.handler = lambda request: httpx.Response(
        500,
        text="<html>Traceback /srv/engine/app.py line 3</html>",
        headers={"content-type": "text/html"},
    )
    response = await client.post(CHAT, json=chat())
    openai_error(response, 500, code="upstream_error")
    assert "Traceback" not in response.text and "/srv" not in response.text


@pytest.mark.anyio
async def test_headers_request_id_and_engine_key(
    engine: MockEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ENGINE_KEY", "sk-engine")
    settings = gateway_settings(environ={"FT_GATEWAY_UPSTREAM__API_KEY_ENV": "TEST_ENGINE_KEY"})
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        response = await client.post(
            CHAT,
            json=chat(),
            headers={
                "authorization": "Bearer sk-client",
                "x-request-id": "req-42",
                "connection": "keep-alive, x-private",
                "x-private": "hop",
                "keep-alive": "timeout=5",
                "te": "trailers",
                "x-custom": "kept",
            },
        )
        generated = await client.post(CHAT, json=chat())
    assert response.headers["x-request-id"] == "req-42"
    sent = engine.requests[0].headers
    assert sent["authorization"] == "Bearer sk-engine"
    # Not a UUID: the engine gets one derived from it, and the id itself in another header.
    assert sent["x-request-id"] == engine_id("req-42")
    assert sent["x-client-request-id"] == "req-42"
    assert sent["host"] == "127.0.0.1:8000"
    assert sent["x-custom"] == "kept"
    for hop in ("x-private", "keep-alive", "te"):
        assert hop not in sent
    assert len(generated.headers["x-request-id"]) == 32
    generated_id = uuid.UUID(generated.headers["x-request-id"])
    assert engine.requests[1].headers["x-request-id"] == str(generated_id)
    assert "x-client-request-id" not in engine.requests[1].headers


@pytest.mark.anyio
async def test_models_pass_through_and_unknown_paths_404(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    engine.handler = lambda request: httpx.Response(200, json={"object": "list", "data": []})
    models = await client.get("/v1/models")
    assert models.json() == {"object": "list", "data": []}
    assert engine.requests[0].url.path == "/v1/models"
    openai_error(await client.get("/v1/audio/speech"), 404, code="unknown_url")
    openai_error(await client.get(CHAT), 405)
    assert len(engine.requests) == 1


SSE = [
    b'data: {"choices":[{"delta":{"content":"He"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"llo"}}]}\n\n',
    b"data: [DONE]\n\n",
]


@pytest.mark.anyio
async def test_stream_is_relayed_with_no_buffering_headers(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    engine.handler = lambda request: httpx.Response(
        200, content=b"".join(SSE), headers={"content-type": "text/event-stream"}
    )
    response = await client.post(CHAT, json=chat(stream=True))
    assert response.status_code == 200
    # The engine's events, each with the gateway's system_fingerprint (it sends none).
    assert without_fingerprint(response.content) == b"".join(SSE)
    assert response.content.count(b'"system_fingerprint"') == len(SSE) - 1
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["content-type"] == "text/event-stream"


@pytest.mark.anyio
async def test_stream_cut_short_ends_with_an_error_event(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    engine.handler = lambda request: httpx.Response(
        200, content=SSE[0] + b'data: {"choi', headers={"content-type": "text/event-stream"}
    )
    response = await client.post(CHAT, json=chat(stream=True))
    first = without_fingerprint(response.content)
    assert sse_events(first)[0] == SSE[0].decode().strip()
    assert error_event(response.text)["code"] == "upstream_protocol_error"  # then [DONE]


@pytest.mark.anyio
async def test_stream_request_answered_with_an_error_gets_a_status(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    engine.handler = lambda request: httpx.Response(
        400, json={"object": "error", "message": "context too long", "code": 400}
    )
    response = await client.post(CHAT, json=chat(stream=True))
    openai_error(response, 400, message="context too long")
