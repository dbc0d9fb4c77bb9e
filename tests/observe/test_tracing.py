"""Traces: the spans the gateway exports over OTLP, read back by a real collector on
loopback, and the traceparent the engine receives."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from gateway.app.factory import create_app
from gateway.observe.exchange import Exchange
from gateway.observe.tracing import Tracing
from gateway.settings import Tracing as TracingSettings
from tests.support.bodies import CHAT, MODEL, chat, chunk_event, completion, sse
from tests.support.engine import JSON, STREAM_HEAD, FakeEngine, chunk, http_response, sends
from tests.support.gateways import gateway_settings
from tests.support.otlp import CLIENT, SERVER, STATUS_ERROR, KeptSpans, otlp_receiver
from tests.support.requestids import choice_id, engine_id
from tests.support.servers import free_port, running_server

pytestmark = pytest.mark.anyio

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = "00f067aa0ba902b7"
SECRET_PROMPT = "the-secret-prompt-5e2a"
API_KEY = "sk-client-key-91fe"


@contextlib.asynccontextmanager
async def traced_gateway(
    engine_url: str, traces_url: str | None, **tracing: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway under uvicorn with tracing on (``tracing``: more keys), exporting to
    ``traces_url``; yields a client of it. Leaving it shuts the gateway down (spans flushed)."""
    keys = {"enabled": True, "schedule_delay": 0.01, **tracing}
    if traces_url is not None:
        keys["endpoint"] = traces_url
    overrides: dict[tuple[str, ...], Any] = {("tracing", k): v for k, v in keys.items()}
    app = create_app(gateway_settings(engine_url, overrides=overrides))
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield client


def request_id_headers(request_id: str, **more: str) -> dict[str, str]:
    return {"x-request-id": request_id, **more}


def traceparent_of(header: bytes | None) -> tuple[str, str, bool]:
    """(trace id, parent span id, sampled) of a traceparent header."""
    assert header is not None
    version, trace_id, parent, flags = header.decode().split("-")
    assert version == "00"
    return trace_id, parent, bool(int(flags, 16) & 1)


def every_value(spans: Sequence[Any]) -> str:
    """All attribute and event values of ``spans`` as one string, to search for secrets."""
    return json.dumps([[s.attributes, s.events, s.resource] for s in spans])


async def test_a_chat_request_is_one_server_span_with_the_genai_attributes(
    fake_engine: FakeEngine,
) -> None:
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        response = await c.post(
            CHAT,
            json=chat(temperature=0.5, max_tokens=7, seed=3, stop="END"),
            headers=request_id_headers("req-json"),
        )
        assert response.status_code == 200
        server, upstream = await receiver.trace_of("req-json")
    assert server.name == f"chat {MODEL}"
    assert server.kind == SERVER
    assert server.parent_span_id == ""
    attrs = server.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.request.max_tokens"] == 7
    assert attrs["gen_ai.request.seed"] == 3
    assert attrs["gen_ai.request.stop_sequences"] == ["END"]
    assert "gen_ai.request.top_p" not in attrs  # not set, not recorded
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.response.id"] == "chatcmpl-1"
    assert attrs["gen_ai.usage.input_tokens"] == 1
    assert attrs["gen_ai.usage.output_tokens"] == 1
    assert attrs["gen_ai.response.finish_reasons"] == ["stop"]
    assert attrs["http.route"] == CHAT
    assert attrs["http.response.status_code"] == 200
    assert attrs["ft_gateway.request_id"] == "req-json"
    assert attrs["ft_gateway.policy.verdict"] == "passed"
    assert attrs["ft_gateway.upstream.status"] == 200
    assert attrs["ft_gateway.upstream.replica"] == fake_engine.url
    assert "ft_gateway.policy" in server.events
    assert server.resource["service.name"] == "ft-gateway"
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
    assert upstream.kind == CLIENT
    assert upstream.parent_span_id == server.span_id
    assert upstream.attributes["http.response.status_code"] == 200
    assert set(upstream.events) == {"ft_gateway.first_byte"}
    assert server.start <= upstream.start <= upstream.end <= server.end

    # The engine was sent the engine span's context: the trace joins the engine's own.
    seen = fake_engine.find("req-json")
    assert seen is not None
    trace_id, parent, flags = traceparent_of(seen.header(b"traceparent"))
    assert (trace_id, parent, flags) == (server.trace_id, upstream.span_id, True)


async def test_a_clients_traceparent_is_continued_and_replaced_towards_the_engine(
    fake_engine: FakeEngine,
) -> None:
    incoming = f"00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        headers = request_id_headers("req-parent", traceparent=incoming, tracestate="k=v")
        assert (await c.post(CHAT, json=chat(), headers=headers)).status_code == 200
        server, upstream = await receiver.trace_of("req-parent")
    assert server.trace_id == CLIENT_TRACE
    assert server.parent_span_id == CLIENT_PARENT
    seen = fake_engine.find("req-parent")
    assert seen is not None
    assert [n for n, _ in seen.headers].count(b"traceparent") == 1
    assert traceparent_of(seen.header(b"traceparent"))[:2] == (CLIENT_TRACE, upstream.span_id)
    assert seen.header(b"tracestate") == b"k=v"  # carried on, as W3C says


@pytest.mark.parametrize(
    "bad",
    ["garbage", f"00-{'0' * 32}-{CLIENT_PARENT}-01", f"00-{CLIENT_TRACE}-{'0' * 16}-01"],
)
async def test_an_invalid_traceparent_starts_a_new_trace(fake_engine: FakeEngine, bad: str) -> None:
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        headers = request_id_headers("req-bad", traceparent=bad)
        assert (await c.post(CHAT, json=chat(), headers=headers)).status_code == 200
        server, _ = await receiver.trace_of("req-bad")
    assert server.parent_span_id == ""
    assert server.trace_id not in (CLIENT_TRACE, "0" * 32)
    seen = fake_engine.find("req-bad")
    assert seen is not None
    assert traceparent_of(seen.header(b"traceparent"))[0] == server.trace_id


STREAM = (
    STREAM_HEAD
    + chunk(chunk_event("Hel"))
    + chunk(chunk_event("lo", finish="length"))
    + chunk(
        sse(
            {
                "id": "chatcmpl-1",
                "model": MODEL,
                "choices": [],
                "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
            }
        )
    )  # fmt: skip
    + chunk(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)


async def test_a_stream_records_its_first_byte_usage_and_finish_reasons() -> None:
    async with (
        FakeEngine(sends(STREAM)) as engine,
        otlp_receiver() as (receiver, traces),
        traced_gateway(engine.url, traces) as c,
    ):
        body = chat(stream=True, stream_options={"include_usage": True})
        response = await c.post(CHAT, json=body, headers=request_id_headers("req-stream"))
        assert response.status_code == 200 and "[DONE]" in response.text
        server, upstream = await receiver.trace_of("req-stream")
    assert server.attributes["ft_gateway.stream"] is True
    assert server.attributes["gen_ai.response.finish_reasons"] == ["length"]
    assert server.attributes["gen_ai.usage.input_tokens"] == 4
    assert server.attributes["gen_ai.usage.output_tokens"] == 2
    first = upstream.event_times["ft_gateway.first_byte"]
    assert upstream.start <= first <= upstream.end


def test_every_time_a_span_carries_comes_from_one_clock() -> None:
    # A request whose trace begins a second after it came in, as on a loaded machine:
    # the span still starts when the request came in, and its events (the policy's,
    # the first byte) fall between each span's start and end.
    kept = KeptSpans()
    tracing = Tracing(TracingSettings(enabled=True), exporter=kept)
    exchange = Exchange("POST", CHAT, CHAT, "req-clock", started=time.perf_counter() - 1.0)
    tracing.begin(exchange, [])
    tracing.upstream_headers(exchange, [])
    exchange.upstream_started = time.perf_counter()
    exchange.first_byte = time.perf_counter()
    exchange.status = 200
    tracing.finished(exchange)
    tracing.shutdown(timeout=5)
    upstream, server = sorted(kept.spans, key=lambda span: span.kind != SpanKind.CLIENT)
    times = {}
    for span in (server, upstream):
        start, end = span.start_time, span.end_time
        assert start is not None and end is not None
        times[span.kind] = (start, end)
        for event in span.events:
            assert start <= event.timestamp <= end, event.name
    assert [e.name for e in upstream.events] == ["ft_gateway.first_byte"]
    (server_start, server_end), (upstream_start, upstream_end) = times.values()
    assert server_start <= upstream_start <= upstream_end <= server_end
    assert server_end - server_start >= 1_000_000_000


async def test_a_client_hanging_up_mid_stream_ends_the_span_marked() -> None:
    async with (
        FakeEngine() as engine,
        otlp_receiver() as (receiver, traces),
        traced_gateway(engine.url, traces) as c,
    ):
        headers = request_id_headers("req-left", **{"x-bad-mode": "stall"})
        async with c.stream("POST", CHAT, json=chat(stream=True), headers=headers) as response:
            async for _ in response.aiter_bytes():
                break  # the first event is in: hang up while the engine stalls
        server, upstream = await receiver.trace_of("req-left")
    assert server.attributes["ft_gateway.client_disconnected"] is True
    assert "ft_gateway.client_disconnected" in server.events
    assert "ft_gateway.first_byte" in upstream.events
    assert server.end >= upstream.end


async def test_a_rejected_request_has_the_verdict_and_no_engine_span(
    fake_engine: FakeEngine,
) -> None:
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        headers = request_id_headers("req-rejected")
        response = await c.post(CHAT, json=chat(logprobs=True), headers=headers)
        assert response.status_code == 400
        (server,) = await receiver.trace_of("req-rejected", spans=1)
    assert server.attributes["ft_gateway.policy.verdict"] == "rejected"
    assert "logprobs:rejected" in server.attributes["ft_gateway.policy.fields"]
    assert server.attributes["error.type"] == response.json()["error"]["code"]
    assert server.attributes["http.response.status_code"] == 400
    assert server.events["ft_gateway.policy"]["ft_gateway.policy.verdict"] == "rejected"
    assert fake_engine.find("req-rejected") is None
    assert receiver.of_trace(server.trace_id) == [server]


async def test_an_engine_failure_marks_the_span_as_an_error(fake_engine: FakeEngine) -> None:
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        headers = request_id_headers("req-500", **{"x-bad-mode": "html500"})
        assert (await c.post(CHAT, json=chat(), headers=headers)).status_code >= 500
        server, upstream = await receiver.trace_of("req-500")
    assert server.status == STATUS_ERROR
    assert upstream.attributes["http.response.status_code"] == 500


async def test_no_text_in_spans_unless_captured_and_never_the_key(fake_engine: FakeEngine) -> None:
    prompt = [{"role": "user", "content": SECRET_PROMPT}]
    headers = request_id_headers("req-content", authorization=f"Bearer {API_KEY}")
    async with otlp_receiver() as (receiver, traces):
        async with traced_gateway(fake_engine.url, traces) as c:
            assert (await c.post(CHAT, json=chat(messages=prompt), headers=headers)).is_success
            spans = await receiver.trace_of("req-content")
        assert SECRET_PROMPT not in every_value(spans)
        assert API_KEY not in every_value(spans)
        receiver.spans.clear()
        async with traced_gateway(fake_engine.url, traces, capture_content=True) as c:
            assert (await c.post(CHAT, json=chat(messages=prompt), headers=headers)).is_success
            server, upstream = await receiver.trace_of("req-content")
    assert json.loads(server.attributes["gen_ai.input.messages"]) == prompt
    assert json.loads(server.attributes["gen_ai.output.messages"]) == ["ok"]
    assert API_KEY not in every_value([server, upstream])


async def test_the_config_names_the_service_and_the_sample_ratio(
    fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    async with otlp_receiver() as (receiver, traces):
        async with traced_gateway(fake_engine.url, traces) as c:
            assert (await c.post(CHAT, json=chat(), headers={"x-request-id": "env"})).is_success
            (server, _) = await receiver.trace_of("env")
        assert server.resource["service.name"] == "from-env"
        receiver.spans.clear()
        async with traced_gateway(fake_engine.url, traces, service_name="gw", sample_ratio=0) as c:
            assert (await c.post(CHAT, json=chat(), headers={"x-request-id": "off"})).is_success
        # The gateway is shut down, its spans flushed: none was sampled.
        assert receiver.spans == []
    seen = fake_engine.find("off")
    assert seen is not None
    assert traceparent_of(seen.header(b"traceparent"))[2] is False  # not sampled, still sent


async def test_the_otel_sampler_variable_applies_when_the_config_has_no_ratio(
    fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    async with otlp_receiver() as (receiver, traces):
        async with traced_gateway(fake_engine.url, traces) as c:
            assert (await c.post(CHAT, json=chat())).is_success
        assert receiver.spans == []


async def test_a_dead_collector_fails_no_request_and_its_spans_are_counted(
    fake_engine: FakeEngine,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"
    overrides: dict[tuple[str, ...], Any] = {
        ("tracing", "enabled"): True,
        ("tracing", "endpoint"): dead,
        ("tracing", "export_timeout"): 0.5,
    }
    app = create_app(gateway_settings(fake_engine.url, overrides=overrides))
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        for _ in range(3):
            assert (await c.post(CHAT, json=chat())).status_code == 200
        scrape = (await c.get("/metrics")).text
        assert "ft_gateway_trace_spans_dropped_total" in scrape
    # Shutting down flushed the six spans to the dead collector: all lost, all counted.
    assert app.state.metrics.snapshot().trace_spans_dropped == 6


class _BlockedExporter(SpanExporter):
    """A collector that does not answer until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_spans_past_a_full_queue_are_dropped_and_counted() -> None:
    exporter = _BlockedExporter()
    tracing = Tracing(TracingSettings(enabled=True, queue_size=2), exporter=exporter)
    for _ in range(50):
        tracing.tracer.start_span("s").end()
    # At most one batch (2 spans) is with the exporter, 2 wait in the queue.
    assert tracing.dropped >= 46
    exporter.release.set()
    tracing.shutdown(timeout=5)
    assert exporter.exported + tracing.dropped == 50


async def test_tracing_off_builds_no_tracer_and_leaves_traceparent_alone(
    fake_engine: FakeEngine,
) -> None:
    app = create_app(gateway_settings(fake_engine.url))
    assert app.state.gateway.tracer is None
    incoming = f"00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await c.post(CHAT, json=chat(), headers={"x-request-id": "plain"})
        await c.post(CHAT, json=chat(), headers={"x-request-id": "own", "traceparent": incoming})
    plain, own = fake_engine.find("plain"), fake_engine.find("own")
    assert plain is not None and own is not None
    assert plain.header(b"traceparent") is None
    assert own.header(b"traceparent") == incoming.encode()  # passed on as before


async def test_a_completions_request_is_a_text_completion_span() -> None:
    answer = http_response(200, json.dumps(completion("x")).encode(), headers=JSON)
    async with (
        FakeEngine(sends(answer)) as engine,
        otlp_receiver() as (receiver, traces),
        traced_gateway(engine.url, traces) as c,
    ):
        body = {"model": MODEL, "prompt": "hi"}
        assert (
            await c.post("/v1/completions", json=body, headers={"x-request-id": "tc"})
        ).is_success
        server, _ = await receiver.trace_of("tc")
    assert server.name == f"text_completion {MODEL}"
    assert server.attributes["gen_ai.operation.name"] == "text_completion"


async def test_an_embeddings_request_is_an_embeddings_span_with_input_tokens_only() -> None:
    data = [{"object": "embedding", "index": 0, "embedding": "AAAAAA=="}]
    body = {
        "object": "list",
        "data": data,
        "model": "emb",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    answer = http_response(200, json.dumps(body).encode(), headers=JSON)
    async with (
        FakeEngine(sends(answer)) as engine,
        otlp_receiver() as (receiver, traces),
        traced_gateway(engine.url, traces) as c,
    ):
        engine.models = ["emb"]  # what it lists: the gateway refuses names it does not
        sent = {"model": "emb", "input": ["a b c"], "encoding_format": "base64", "dimensions": 1}
        assert (
            await c.post("/v1/embeddings", json=sent, headers={"x-request-id": "em"})
        ).is_success
        server, upstream = await receiver.trace_of("em")
    assert server.name == "embeddings emb"
    attributes = server.attributes
    assert attributes["gen_ai.operation.name"] == "embeddings"
    assert attributes["gen_ai.request.encoding_formats"] == ["base64"]
    assert attributes["gen_ai.embeddings.dimension.count"] == 1
    assert attributes["gen_ai.usage.input_tokens"] == 3
    assert "gen_ai.usage.output_tokens" not in attributes
    assert upstream.attributes["gen_ai.usage.input_tokens"] == 3


async def test_n_by_fanout_is_one_engine_span_whose_context_each_request_carries(
    fake_engine: FakeEngine,
) -> None:
    async with otlp_receiver() as (receiver, traces), traced_gateway(fake_engine.url, traces) as c:
        response = await c.post(CHAT, json=chat(n=2), headers={"x-request-id": "fan"})
        assert response.status_code == 200 and len(response.json()["choices"]) == 2
        server, upstream = await receiver.trace_of("fan")
    assert server.attributes["gen_ai.request.choice.count"] == 2
    assert server.attributes["ft_gateway.policy.verdict"] == "changed"
    assert server.attributes["gen_ai.response.finish_reasons"] == ["stop", "stop"]
    for i in range(2):
        seen = fake_engine.find(choice_id(engine_id("fan"), i).decode())
        assert seen is not None
        assert traceparent_of(seen.header(b"traceparent"))[:2] == (
            server.trace_id,
            upstream.span_id,
        )
