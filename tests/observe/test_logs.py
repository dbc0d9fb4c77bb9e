"""The access log (one line per request, JSON or text) and the formatters of the gateway's logs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.app.factory import create_app
from gateway.observe.exchange import Exchange
from gateway.observe.logs import AccessLog, JsonFormatter, TextFormatter, _timestamp, logging_config
from gateway.policy.engine import Outcome
from tests.support.bodies import CHAT, MODEL, chat
from tests.support.gateways import asgi_client, gateway_settings

SECRET_CONTENT = "the-secret-prompt-7d41"
CLIENT_KEY = "sk-client-key-ab12"
ENGINE_KEY = "sk-engine-key-cd34"

Gateway = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Gateway:
    monkeypatch.setenv("TEST_ENGINE_KEY", ENGINE_KEY)

    def engine(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("model") == "broken":
            return httpx.Response(500, text="Traceback ...")
        return httpx.Response(200, json={"id": "x", "choices": []})

    @asynccontextmanager
    async def start(**environ: str) -> AsyncIterator[httpx.AsyncClient]:
        settings = gateway_settings(
            overrides={("upstream", "api_key_env"): "TEST_ENGINE_KEY"}, environ=environ
        )
        async with asgi_client(create_app(settings, transport=httpx.MockTransport(engine))) as c:
            yield c

    return start


def secret_chat(**fields: Any) -> dict[str, Any]:
    """A chat request whose prompt must never reach a log line."""
    return chat(messages=[{"role": "user", "content": SECRET_CONTENT}], **fields)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


@pytest.mark.anyio
async def test_one_json_line_per_request(
    gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    async with gateway() as client:
        capsys.readouterr()
        headers = {"authorization": f"Bearer {CLIENT_KEY}", "x-request-id": "req-1"}
        await client.post(CHAT, json=secret_chat(logprobs=True, n=3), headers=headers)
        await client.post(
            CHAT, json=secret_chat(user="u", max_completion_tokens=5), headers=headers
        )
        await client.post(CHAT, json=secret_chat(model="broken"), headers=headers)
        out = lines(capsys)
    records = [json.loads(line) for line in out]
    assert [r["event"] for r in records] == ["request"] * 3
    rejected, changed, failed = records
    assert rejected["ts"].endswith("Z")
    assert {k: v for k, v in rejected.items() if k not in ("ts", "latency_ms")} == {
        "level": "info",
        "event": "request",
        "request_id": "req-1",
        "method": "POST",
        "path": CHAT,
        "model": MODEL,
        "client": None,
        "status": 400,
        "stream": False,
        "policy": "rejected",
        "fields": {"logprobs": "rejected", "n": "fanout"},
        "error": "unsupported_parameter",
        "upstream_status": None,
        "upstream_ms": None,
        "ttfb_ms": None,
        "bytes_out": rejected["bytes_out"],
        "client_disconnected": False,
        "prompt_tokens": None,
        "completion_tokens": None,
        "total_tokens": None,
        "rate_limited": None,
        "reported": None,
    }
    assert rejected["bytes_out"] > 100
    assert changed["policy"] == "changed"
    assert changed["fields"] == {"user": "stripped", "max_completion_tokens": "renamed"}
    assert changed["status"] == changed["upstream_status"] == 200
    assert changed["error"] is None
    assert 0 <= changed["ttfb_ms"] <= changed["upstream_ms"] <= changed["latency_ms"]
    assert failed["policy"] == "passed"
    assert failed["status"] == failed["upstream_status"] == 500
    joined = "\n".join(out)
    for secret in (SECRET_CONTENT, CLIENT_KEY, ENGINE_KEY, "Traceback"):
        assert secret not in joined


@pytest.mark.anyio
async def test_text_format_for_humans(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    async with gateway(FT_GATEWAY_LOG__FORMAT="text") as client:
        capsys.readouterr()
        await client.post(CHAT, json=secret_chat(logprobs=True), headers={"x-request-id": "req-2"})
        # A client-chosen field name cannot start a forged log line.
        await client.post(CHAT, json=secret_chat(**{'x\n2026-01-01 POST / 200 forged="1"': 1}))
        out = lines(capsys)
    assert len(out) == 2
    ts, head = out[0].split(" ", 1)
    assert ts.endswith("Z")
    assert head.startswith(f"POST {CHAT} 400 request_id=req-2 model={MODEL} stream=false ")
    assert " policy=rejected fields=logprobs:rejected error=unsupported_parameter " in head
    assert " upstream_status=" not in head  # absent values are left out
    assert SECRET_CONTENT not in "\n".join(out)
    assert 'fields="x\\n2026-01-01 POST / 200 forged=\\"1\\":rejected"' in out[1]


@pytest.mark.anyio
async def test_request_lines_can_be_turned_off(
    gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    async with gateway(FT_GATEWAY_LOG__REQUESTS="false") as client:
        capsys.readouterr()
        await client.post(CHAT, json=secret_chat())
        assert lines(capsys) == []


def test_long_and_many_client_names_are_cut() -> None:
    stream = io.BytesIO()
    exchange = Exchange("POST", CHAT, CHAT, "r", model="m" * 1000, status=400)
    exchange.outcomes = [Outcome(f"f{i}" + "x" * 500, "rejected") for i in range(100)]
    AccessLog(stream).finished(exchange)
    record = json.loads(stream.getvalue())
    assert len(record["model"]) == 100
    assert len(record["fields"]) == 32
    assert all(len(name) == 100 for name in record["fields"])


def record(**extra: Any) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "gateway.reload", "levelname": "INFO", "msg": "policy %s", "args": ("loaded",)}
        | extra
    )


def test_formatters_carry_extra_fields() -> None:
    data = json.loads(JsonFormatter().format(record(sha256="abc", event="policy_reload")))
    assert data["message"] == "policy loaded"
    assert data["level"] == "info" and data["logger"] == "gateway.reload"
    assert data["sha256"] == "abc" and data["event"] == "policy_reload"
    text = TextFormatter().format(record(sha256="abc", error="a b"))
    assert text.split(" ", 1)[1] == 'INFO policy loaded sha256=abc error="a b"'


def test_logging_config_names_the_formatters() -> None:
    # setup_logging applies it in serve and in each worker process;
    # tests/app/test_reload.py reads the JSON lines of a real serve process.
    for fmt, cls in (("json", JsonFormatter), ("text", TextFormatter)):
        config = logging_config(fmt, "warning")  # type: ignore[arg-type]
        assert config["formatters"]["gateway"]["()"] == f"gateway.observe.logs.{cls.__name__}"
        assert config["loggers"]["gateway"]["level"] == "WARNING"
        assert config["handlers"]["stdout"]["stream"] == "ext://sys.stdout"
        # Every other library's records too (OpenTelemetry's), on the same handler.
        assert config["root"] == {"handlers": ["stdout"], "level": "WARNING"}
    assert logging_config("json", "info")["root"]["level"] == "WARNING"  # not httpx's per request
    assert logging_config("json", "debug")["root"]["level"] == "DEBUG"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (500, b"Traceback ...", "upstream_error"),
        (503, b'{"error": {"message": "overloaded"}}', "upstream_error"),
        (
            404,
            b'{"error": {"message": "The model `m` does not exist.", "type": '
            b'"NotFoundError", "code": "model_not_found"}}',
            "model_not_found",
        ),
    ],
)
async def test_a_relayed_engine_error_is_the_error_in_record_log_and_span(
    status: int, body: bytes, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/operating.md: "error is the error code the client got"; docs/tracing.md: the
    # span's error.type likewise. A relayed engine error was logged "error": null.
    exporter = InMemorySpanExporter()
    settings = gateway_settings(overrides={("tracing", "enabled"): True})
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    app = create_app(settings, transport=transport, span_exporter=exporter)
    async with asgi_client(app) as client:
        capsys.readouterr()
        answer = await client.post(CHAT, json=chat(), headers={"x-request-id": "req-relayed"})
        [line] = lines(capsys)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code
    record = json.loads(line)
    assert record["error"] == code and record["upstream_status"] == status
    [span] = [
        s for s in exporter.get_finished_spans() if s.attributes and "http.route" in s.attributes
    ]
    assert (span.attributes or {})["error.type"] == code


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (0.5, "1970-01-01T00:00:00.500Z"),
        (1777889521.532, "2026-05-04T10:12:01.532Z"),
        (1777889521.0009, "2026-05-04T10:12:01.000Z"),  # cut, not rounded
        (1777889521.9995, "2026-05-04T10:12:01.999Z"),
        (1777889522.0, "2026-05-04T10:12:02.000Z"),  # the next second, after one cached
    ],
)
def test_timestamps_are_utc_with_milliseconds_cut(epoch: float, text: str) -> None:
    assert _timestamp(epoch) == text
