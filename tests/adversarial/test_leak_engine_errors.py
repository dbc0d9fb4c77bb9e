"""An engine's words reach a client only in a shape that cannot carry a secret or a
map of the network: the engine's key (and any client credential) never, whatever the
engine repeats and wherever it puts it (SECURITY.md, "What reaches the client").

The tables feed the normaliser (gateway/proxy/engineerrors.py) what engines and their
proxies write; the end-to-end tests run a real gateway under uvicorn in front of an
engine that repeats the Authorization it received (tests/support/echoengine.py), with
the openai SDK and raw httpx as the clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from gateway.proxy.engineerrors import engine_error_object, normalise_error
from gateway.settings import Settings
from tests.support.bodies import CHAT, ERROR_KEYS, MODEL, chat, sse_events
from tests.support.echoengine import echo
from tests.support.engine import FakeEngine
from tests.support.faults import keyed_fault_settings
from tests.support.gateways import Gateway, serve_gateway
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio
ENGINE_KEY = "sk-engine-7f3a9c21d4e5b6a8"
CLIENT_KEY = "sk-client-1b2c3d4e5f6a7b8c"
# A second client credential, in Azure OpenAI's api-key header (x-api-key is a key the
# gateway authenticates, Anthropic's: two different keys there are a 401, before any engine).
SIDE_KEY = "sk-side-0a9b8c7d6e5f4a3b"
SECRETS = (ENGINE_KEY, CLIENT_KEY, SIDE_KEY)


def _message(status: int, message: str, **inner: Any) -> dict[str, Any]:
    body = json.dumps({"error": {"message": message, **inner}}).encode()
    return normalise_error(status, body)


@pytest.mark.parametrize(
    ("message", "leak"),
    [
        ("connect to [::1]:8000 failed", "::1"),
        ("bound to 0.0.0.0:8000", "0.0.0.0"),
        ("the scheduler at 127.0.0.1:7000 is gone", "127.0.0.1"),
        ("metadata from 169.254.169.254 refused", "169.254.169.254"),
        ("peer fd12:3456:789a::7 reset", "fd12:3456:789a::7"),
        ("link fe80::1%eth0 down", "fe80::1"),
        ("worker vllm-0.vllm.default.svc refused", "vllm-0.vllm.default.svc"),
        ("cache at redis-master.cache:6379 timed out", "redis-master.cache"),
        ("pool engine-7d9f8b6c4-x2x9z is full", "engine-7d9f8b6c4-x2x9z"),
        ("weights /models/Qwen3/model.safetensors missing", "/models/Qwen3"),
        ("see ~/.cache/huggingface/hub for details", "huggingface"),
        ("cannot open ./weights/shard-1.bin", "weights/shard"),
        (r"cannot open C:\models\qwen.gguf", "qwen.gguf"),
        ("fetch file:///mnt/data/tokenizer.json failed", "/mnt/data"),
        ("pull https://admin:hunter2@registry.internal/v2 failed", "hunter2"),
        ("store redis://:s3cretpass@10.1.2.3:6379/0 down", "s3cretpass"),
        ("notify ops@corp.example about it", "ops@corp.example"),
        ("key sk-proj-abcDEF1234567890xyz rejected", "sk-proj-abcDEF1234567890xyz"),
        ("token hf_AbCdEfGhIjKlMnOpQrStUv unknown", "hf_AbCdEfGhIjKlMnOpQrStUv"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
        ("digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "9f86d08"),
        ("colour \x1b[31mred\x1b[0m here", "\x1b"),
        ("forged\u2028line", "\u2028"),
        ('Traceback (most recent call last):\n  File "x.py", line 3, in f', "Traceback"),
        ("<html><body>502 Bad Gateway</body></html>", "<html"),
    ],
)
def test_engine_messages_lose_every_address_host_path_and_key(message: str, leak: str) -> None:
    error = _message(400, message)
    assert set(error) == ERROR_KEYS
    assert leak not in json.dumps(error, ensure_ascii=False)
    assert error["message"]  # something readable is always left


@pytest.mark.parametrize(
    "message",
    [
        "'messages' is a required property",
        "max_tokens must be at least 1, got 0.",
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
        "of the messages or completion.",
        "temperature: Input should be less than or equal to 2 [type=less_than_equal, "
        "input_value=3.5, input_type=float]",
        "Unsupported value: 'stream_options' is only allowed when 'stream' is true.",
        "top_p must be in (0, 1], got 1.5.",
        "Invalid value for 'response_format.type': expected one of text, json_object.",
    ],
)
def test_typical_validation_messages_pass_unchanged(message: str) -> None:
    assert _message(400, message)["message"] == message


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        ({"param": "messages[0].content"}, {"param": "messages[0].content"}),
        ({"param": "response_format.type"}, {"param": "response_format.type"}),
        ({"param": "Bearer sk-live-abcdef1234567890"}, {"param": None}),
        ({"param": "/srv/engine/app.py"}, {"param": None}),
        ({"param": "x" * 300}, {"param": None}),
        ({"param": "token_9f86d081884c7d65"}, {"param": None}),
        ({"code": "context_length_exceeded"}, {"code": "context_length_exceeded"}),
        ({"code": "sk-live-abcdef1234567890"}, {"code": None}),
        ({"code": "internal_engine_state_7"}, {"code": None}),
        ({"type": "invalid_request_error"}, {"type": "invalid_request_error"}),
        ({"type": "Bearer sk-live-abcdef1234567890"}, {"type": "invalid_request_error"}),
    ],
)
def test_param_code_and_type_pass_only_in_their_shapes(
    inner: dict[str, Any], expected: dict[str, Any]
) -> None:
    error = _message(400, "bad value", **inner)
    for key, value in expected.items():
        assert error[key] == value, (key, error)


def test_known_secrets_are_removed_whatever_their_shape() -> None:
    # Shapes the token rules let through (a plain word, a field-like name): only an
    # exact match can catch these.
    word, field = "correcthorsebattery", "staple_key"
    body = json.dumps(
        {"error": {"message": f"key {word} and {field} refused", "param": field}}
    ).encode()
    error = normalise_error(400, body, secrets=(word, field))
    assert word not in json.dumps(error) and field not in json.dumps(error)
    assert error["param"] is None
    assert (
        engine_error_object(
            {"error": {"message": f"bad {word}", "code": 400}}, status=None, secrets=(word,)
        )["message"]
        == "bad [redacted]"
    )


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(echo) as running:
        yield running


def _settings(engine: FakeEngine, monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    return keyed_fault_settings(
        engine.url, monkeypatch, engine_key=ENGINE_KEY, client_key=CLIENT_KEY, **env
    )


@pytest.fixture
async def gateway(engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    async with serve_gateway(_settings(engine, monkeypatch)) as served:
        yield served


def assert_no_secret(text: str) -> None:
    """None of the keys, nor the engine's own Authorization, in ``text``."""
    for secret in SECRETS:
        assert secret not in text, (secret, text)


@pytest.mark.parametrize("where", ["message", "flat", "unprocessable"])
async def test_an_engine_4xx_repeating_its_key_reaches_the_sdk_without_it(
    engine: FakeEngine, gateway: Gateway, where: str
) -> None:
    headers = {"x-echo": where, "api-key": SIDE_KEY}
    async with sdk(gateway.url, api_key=CLIENT_KEY, default_headers=headers) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
    error = caught.value
    assert 400 <= error.status_code < 500
    assert_no_secret(error.response.text)
    assert_no_secret(str(error.response.headers))
    assert_no_secret(str(error))
    # The engine did repeat its key: what it sent is what the gateway cleaned.
    assert engine.requests[-1].header(b"authorization") == f"Bearer {ENGINE_KEY}".encode()


@pytest.mark.parametrize("where", ["event", "errorline"])
async def test_a_mid_stream_error_event_repeating_the_key_ends_the_stream_without_it(
    gateway: Gateway, where: str
) -> None:
    headers = {"authorization": f"Bearer {CLIENT_KEY}", "x-echo": where, "api-key": SIDE_KEY}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        response = await client.post(CHAT, json=chat(stream=True), headers=headers)
    assert response.status_code == 200
    assert_no_secret(response.text)
    error = json.loads(sse_events(response.text)[-2].removeprefix("data: "))["error"]
    assert set(error) == ERROR_KEYS and error["message"]
    # Through the SDK too: the APIError it raises says nothing of the keys.
    sdk_headers = {"x-echo": where, "api-key": SIDE_KEY}
    async with sdk(gateway.url, api_key=CLIENT_KEY, default_headers=sdk_headers) as openai_client:
        stream = await openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError) as caught:
            async for _ in stream:
                pass
    assert_no_secret(str(caught.value))
    assert_no_secret(json.dumps(caught.value.body))


async def test_a_native_responses_error_event_repeating_the_key_reaches_no_client(
    engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(engine, monkeypatch, FT_GATEWAY_UPSTREAM__RESPONSES="native")
    headers = {"authorization": f"Bearer {CLIENT_KEY}", "x-echo": "responses"}
    async with serve_gateway(settings) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            body = {"model": MODEL, "input": "hi", "stream": True}
            response = await client.post("/v1/responses", json=body, headers=headers)
            whole = {"model": MODEL, "input": "hi"}
            failed = await client.post(
                "/v1/responses", json=whole, headers={**headers, "x-echo": "failedresponse"}
            )
    assert response.status_code == 200
    assert_no_secret(response.text)
    kinds = [json.loads(e.split("data: ", 1)[1])["type"] for e in sse_events(response.text)]
    assert "error" in kinds and kinds[-1] == "response.failed"
    assert failed.status_code == 200 and failed.json()["status"] == "failed"
    assert_no_secret(failed.text)
    assert failed.json()["error"]["message"]


async def test_engine_response_headers_repeating_the_key_reach_no_client(
    gateway: Gateway,
) -> None:
    headers = {"x-echo": "headers", "api-key": SIDE_KEY}
    async with sdk(gateway.url, api_key=CLIENT_KEY, default_headers=headers) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    assert raw.status_code == 200
    assert_no_secret(str(raw.headers))


# Anthropic's Messages API: the client's key in x-api-key, as Claude Code sends it.
MESSAGES = "/v1/messages"
ANTHROPIC = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}


def _messages_body(*, stream: bool = False) -> dict[str, Any]:
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    return {**body, "stream": True} if stream else body


@pytest.mark.parametrize("where", ["message", "flat", "unprocessable"])
async def test_a_messages_clients_key_never_reaches_the_engine_nor_comes_back(
    engine: FakeEngine, gateway: Gateway, where: str
) -> None:
    headers = {**ANTHROPIC, "x-echo": where}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        response = await client.post(MESSAGES, json=_messages_body(), headers=headers)
    assert 400 <= response.status_code < 500
    assert_no_secret(response.text)
    assert_no_secret(str(response.headers))
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"] and body["request_id"] == response.headers["request-id"]
    seen = engine.requests[-1]
    assert seen.header(b"x-api-key") is None and seen.header(b"anthropic-version") is not None
    assert seen.header(b"authorization") == f"Bearer {ENGINE_KEY}".encode()


@pytest.mark.parametrize("where", ["event", "errorline"])
async def test_a_messages_streams_engine_error_is_anthropics_error_event_without_a_key(
    gateway: Gateway, where: str
) -> None:
    headers = {**ANTHROPIC, "x-echo": where}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        response = await client.post(MESSAGES, json=_messages_body(stream=True), headers=headers)
    assert response.status_code == 200
    assert_no_secret(response.text)
    last = sse_events(response.text)[-1]
    name, data = last.split("\n", 1)
    assert name == "event: error"
    error = json.loads(data.removeprefix("data: "))
    assert error["type"] == "error" and set(error["error"]) == {"type", "message"}
    assert error["error"]["message"]
