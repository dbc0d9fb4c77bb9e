"""The processor's decisions without Envoy or gRPC: ProcessingRequest messages in, the
ProcessingResponse messages read (each case one HTTP request's messages)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.trace import SpanKind

from gateway.extproc.decision import UNSUPPORTED
from gateway.settings import Settings, load_settings
from tests.support.extproc import Processor, body_message, header_message, set_headers
from tests.support.limits import key_of, write_keys
from tests.support.otlp import KeptSpans
from tests.support.paths import POLICY

CHAT = "/v1/chat/completions"
PLAIN: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
JSON = {"content-type": "application/json"}

pytestmark = pytest.mark.anyio


def _settings(directory: Path, text: str = "") -> Settings:
    path = directory / "config.yaml"
    path.write_text(f"policy: {POLICY}\n" + text)
    return load_settings(path, environ={})


@pytest.fixture
def processor(tmp_path: Path) -> Processor:
    return Processor(_settings(tmp_path))


def _error(answer: Any) -> tuple[int, dict[str, Any]]:
    immediate = answer.immediate_response
    assert answer.WhichOneof("response") == "immediate_response"
    return immediate.status.code, json.loads(immediate.body)


async def _chat(processor: Processor, body: dict[str, Any] | bytes) -> list[Any]:
    return await processor.process(header_message(CHAT, headers=JSON), body_message(body))


async def test_a_plain_request_goes_on_unchanged_with_its_model_header(
    processor: Processor,
) -> None:
    headers, body = await _chat(processor, PLAIN)
    assert headers.WhichOneof("response") == "request_headers"
    assert not headers.HasField("mode_override")
    common = body.request_body.response
    assert not common.HasField("body_mutation")
    assert set_headers(body) == {"x-ft-gateway-model": b"m"}
    assert common.clear_route_cache
    processor.records.clear()
    answers = await processor.process(
        header_message(CHAT, headers=JSON),
        body_message(PLAIN),
        header_message("", headers={":status": "200"}, response=True),
    )
    # Recorded when the answer's headers pass, with their status.
    assert answers[-1].WhichOneof("response") == "response_headers"
    assert [(r.status, r.upstream_status, r.verdict) for r in processor.records] == [
        (200, 200, "passed")
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("logprobs", False), ("n", 1), ("logit_bias", {}), ("response_format", {"type": "text"})],
)
async def test_a_neutral_value_passes_as_the_client_sent_it(
    processor: Processor, field: str, value: Any
) -> None:
    _, body = await _chat(processor, {**PLAIN, field: value})
    assert not body.request_body.response.HasField("body_mutation")


@pytest.mark.parametrize(
    ("field", "value", "param"),
    [
        ("logprobs", True, "logprobs"),
        ("logit_bias", {"1": 2}, "logit_bias"),
        ("response_format", {"type": "json_object"}, "response_format"),
    ],
)
async def test_a_refused_field_is_the_gateways_400(
    processor: Processor, field: str, value: Any, param: str
) -> None:
    _, answer = await _chat(processor, {**PLAIN, field: value})
    status, error = _error(answer)
    assert status == 400
    assert error["error"]["param"] == param
    assert error["error"]["type"] == "invalid_request_error"
    assert set(error["error"]) == {"message", "type", "param", "code"}
    headers = {
        h.header.key: h.header.raw_value for h in answer.immediate_response.headers.set_headers
    }
    assert headers["content-type"] == b"application/json"
    (record,) = processor.records
    assert (record.status, record.verdict) == (400, "rejected")


async def test_a_rename_sends_the_new_body_with_its_length(processor: Processor) -> None:
    _, body = await _chat(processor, {**PLAIN, "max_completion_tokens": 5})
    common = body.request_body.response
    sent = common.body_mutation.body
    assert orjson.loads(sent) == {**PLAIN, "max_tokens": 5}
    assert set_headers(body)["content-length"] == str(len(sent)).encode()


async def test_n_by_fan_out_is_refused_by_name(processor: Processor) -> None:
    _, answer = await _chat(processor, {**PLAIN, "n": 3})
    status, error = _error(answer)
    assert (status, error["error"]["param"], error["error"]["code"]) == (400, "n", UNSUPPORTED)
    assert "fan-out" in error["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/v1/responses"), ("GET", "/v1/responses/resp_1")]
)
async def test_the_translated_responses_api_is_refused_by_name(
    processor: Processor, method: str, path: str
) -> None:
    (answer,) = await processor.process(header_message(path, method=method, headers=JSON))
    status, error = _error(answer)
    assert (status, error["error"]["code"]) == (400, UNSUPPORTED)
    assert "Responses API" in error["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/files"),
        ("GET", "/v1/files/file-abc/content"),
        ("POST", "/v1/batches"),
        ("POST", "/v1/batches/batch_1/cancel"),
    ],
)
async def test_the_batch_api_is_refused_by_name(
    processor: Processor, method: str, path: str
) -> None:
    (answer,) = await processor.process(header_message(path, method=method, headers=JSON))
    status, error = _error(answer)
    assert (status, error["error"]["code"]) == (400, UNSUPPORTED)
    assert "Batch API" in error["error"]["message"]


async def test_native_responses_are_policed_like_any_route(tmp_path: Path) -> None:
    processor = Processor(_settings(tmp_path, "upstream: {responses: native}\n"))
    body = {"model": "m", "input": "hi"}
    answers = await processor.process(
        header_message("/v1/responses", headers=JSON), body_message(body)
    )
    assert answers[1].WhichOneof("response") == "request_body"


async def test_a_path_the_policy_has_no_say_in_is_passed_by(processor: Processor) -> None:
    (answer,) = await processor.process(
        header_message("/v1/models", method="GET", end_of_stream=True)
    )
    mode = answer.mode_override
    assert answer.WhichOneof("response") == "request_headers"
    assert (mode.request_body_mode, mode.response_header_mode) == (0, 2)  # NONE, SKIP
    assert processor.records == []


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"", "invalid_json"), (b"{", "invalid_json"), (b"[1]", "invalid_json")],
)
async def test_a_body_that_is_no_json_object_is_a_400(
    processor: Processor, body: bytes, code: str
) -> None:
    _, answer = await _chat(processor, body)
    assert _error(answer)[1]["error"]["code"] == code


async def test_a_post_without_a_body_is_refused_on_its_headers(processor: Processor) -> None:
    (answer,) = await processor.process(header_message(CHAT, end_of_stream=True))
    assert _error(answer)[1]["error"]["code"] == "invalid_json"


async def test_a_declared_length_past_the_limit_is_a_413_before_the_body(
    processor: Processor,
) -> None:
    (answer,) = await processor.process(
        header_message(CHAT, headers={**JSON, "content-length": str(16 * 1024 * 1024)})
    )
    assert _error(answer)[0] == 413


async def test_a_body_in_parts_is_decided_whole(processor: Processor) -> None:
    raw = orjson.dumps({**PLAIN, "logprobs": True})
    answers = await processor.process(
        header_message(CHAT, headers=JSON),
        body_message(raw[:10], end_of_stream=False),
        body_message(raw[10:]),
    )
    assert answers[1].WhichOneof("response") == "request_body"
    assert _error(answers[2])[1]["error"]["param"] == "logprobs"


async def test_keys_are_checked_on_the_headers_and_give_the_profile(tmp_path: Path) -> None:
    keys = write_keys(tmp_path, {"alice": None})
    processor = Processor(_settings(tmp_path, f"auth: {{keys_file: {keys}}}\n"))
    (answer,) = await processor.process(header_message(CHAT, headers=JSON))
    assert _error(answer)[0] == 401
    good = {**JSON, "authorization": f"Bearer {key_of('alice')}"}
    answers = await processor.process(header_message(CHAT, headers=good), body_message(PLAIN))
    assert answers[1].WhichOneof("response") == "request_body"
    assert [(r.status, r.client) for r in processor.records] == [(401, None), (0, "alice")]


async def test_the_profile_header_picks_the_overlay(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY.read_text() + "\nprofiles:\n  lenient:\n    routes:\n      /v1/chat/completions:\n"
        "        fields:\n          logprobs: {action: pass}\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {policy}\nextproc: {{profile_header: x-ft-profile}}\n")
    processor = Processor(load_settings(config, environ={}))
    asked = {**PLAIN, "logprobs": True}
    lenient = {**JSON, "x-ft-profile": "lenient"}
    answers = await processor.process(header_message(CHAT, headers=lenient), body_message(asked))
    assert answers[1].WhichOneof("response") == "request_body"
    _, refused = await _chat(processor, asked)
    assert _error(refused)[0] == 400


def _fleet(directory: Path) -> Settings:
    return _settings(
        directory,
        "deployments:\n"
        "  - {name: small, upstream: {url: 'http://127.0.0.1:9'}, models: [small-1],\n"
        "     aliases: {fast: small-1}}\n"
        "  - {name: big, upstream: {url: 'http://127.0.0.1:9'}, models: [big-1]}\n",
    )


async def test_a_fleet_names_the_deployment_and_rewrites_an_alias(tmp_path: Path) -> None:
    processor = Processor(_fleet(tmp_path))
    _, body = await _chat(processor, {**PLAIN, "model": "fast"})
    sent = body.request_body.response.body_mutation.body
    assert orjson.loads(sent)["model"] == "small-1"
    assert set_headers(body) == {
        "x-ft-gateway-deployment": b"small",
        "x-ft-gateway-model": b"small-1",
        "content-length": str(len(sent)).encode(),
    }
    _, body = await _chat(processor, {**PLAIN, "model": "big-1"})
    assert not body.request_body.response.HasField("body_mutation")
    assert set_headers(body)["x-ft-gateway-deployment"] == b"big"


@pytest.mark.parametrize(
    ("model", "status", "code"),
    [("nope", 404, "model_not_found"), (None, 400, "missing_required_parameter")],
)
async def test_a_fleet_refuses_a_model_it_cannot_place(
    tmp_path: Path, model: str | None, status: int, code: str
) -> None:
    processor = Processor(_fleet(tmp_path))
    body = {k: v for k, v in {**PLAIN, "model": model}.items() if v is not None}
    _, answer = await _chat(processor, body)
    got_status, error = _error(answer)
    assert (got_status, error["error"]["code"]) == (status, code)


async def test_an_undeclared_route_is_the_404_serve_gives(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nroutes:\n  /v1/chat/completions:\n    fields: {}\n")
    processor = Processor(_settings(tmp_path).model_copy(update={"policy": policy}))
    answers = await processor.process(
        header_message("/v1/embeddings", headers=JSON), body_message({"model": "m", "input": "x"})
    )
    assert _error(answers[1])[0] == 404


async def test_a_stream_closed_before_the_answer_is_recorded_unanswered(
    processor: Processor,
) -> None:
    await _chat(processor, PLAIN)
    (record,) = processor.records
    assert (record.status, record.upstream_started is not None) == (0, True)


async def test_report_only_records_what_it_would_refuse_and_passes(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.read_text() + "\nenforcement: report\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {policy}\n")
    processor = Processor(load_settings(config, environ={}))
    _, body = await _chat(processor, {**PLAIN, "logprobs": True})
    assert body.WhichOneof("response") == "request_body"
    (record,) = processor.records
    assert record.report is not None
    assert [o.field for o in record.report.fields] == ["logprobs"]


async def test_the_span_joins_envoys_trace_and_the_engine_gets_its_context(
    tmp_path: Path,
) -> None:
    kept = KeptSpans()
    settings = _settings(tmp_path, "tracing: {enabled: true}\nlog: {requests: false}\n")
    processor = Processor(settings, span_exporter=kept)
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    traced = {**JSON, "traceparent": f"00-{trace_id}-{parent}-01"}
    _, body, _ = await processor.process(
        header_message(CHAT, headers=traced),
        body_message(PLAIN),
        header_message("", headers={":status": "200"}, response=True),
    )
    sent = set_headers(body)["traceparent"].decode()
    assert sent.split("-")[1] == trace_id and sent.split("-")[2] != parent
    tracer = processor.built.state.tracer
    assert tracer is not None
    tracer.shutdown(5)
    server = next(s for s in kept.spans if s.kind == SpanKind.SERVER)
    assert server.context is not None and server.parent is not None
    assert f"{server.context.trace_id:032x}" == trace_id
    assert f"{server.parent.span_id:016x}" == parent
    assert server.attributes is not None
    assert server.attributes["gen_ai.request.model"] == "m"


async def test_a_clients_own_routing_headers_never_reach_envoys_routes(
    processor: Processor,
) -> None:
    spoofed = {**JSON, "x-ft-gateway-deployment": "big", "x-ft-gateway-model": "big-1"}
    _, body = await processor.process(header_message(CHAT, headers=spoofed), body_message(PLAIN))
    mutation = body.request_body.response.header_mutation
    # The model's is set over the client's; one deployment sets no deployment header.
    assert list(mutation.remove_headers) == ["x-ft-gateway-deployment"]
    assert set_headers(body) == {"x-ft-gateway-model": b"m"}
    (passed,) = await processor.process(
        header_message("/v1/models", method="GET", headers=spoofed, end_of_stream=True)
    )
    removed = passed.request_headers.response.header_mutation.remove_headers
    assert set(removed) == {"x-ft-gateway-model", "x-ft-gateway-deployment"}


# Anthropic's Messages API: translated by serve (refused here by name), native policed.
MESSAGES_BODY: dict[str, Any] = {
    "model": "m",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
ANTHROPIC = {**JSON, "anthropic-version": "2023-06-01", "x-request-id": "req-1"}


def _anthropic_error(answer: Any) -> tuple[int, dict[str, Any], dict[str, bytes]]:
    status, body = _error(answer)
    headers = {
        h.header.key: h.header.raw_value for h in answer.immediate_response.headers.set_headers
    }
    return status, body, headers


@pytest.mark.parametrize(
    "path", ["/v1/messages", "/v1/messages?beta=true", "/v1/messages/count_tokens"]
)
async def test_the_translated_messages_api_is_refused_by_name_in_anthropics_shape(
    processor: Processor, path: str
) -> None:
    (answer,) = await processor.process(header_message(path, headers=ANTHROPIC))
    status, error, headers = _anthropic_error(answer)
    assert status == 400
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "Messages API" in error["error"]["message"]
    assert "upstream.messages: native" in error["error"]["message"]
    assert headers["request-id"] == b"req-1" and error["request_id"] == "req-1"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches/msgbatch_1/results")],
)
async def test_the_message_batches_api_is_anthropics_404_naming_it(
    tmp_path: Path, method: str, path: str
) -> None:
    processor = Processor(_settings(tmp_path, "upstream: {messages: native}\n"))
    (answer,) = await processor.process(header_message(path, method=method, headers=ANTHROPIC))
    status, error, _ = _anthropic_error(answer)
    assert (status, error["error"]["type"]) == (404, "not_found_error")
    assert "Message Batches API" in error["error"]["message"]


async def test_native_messages_are_policed_and_refused_in_anthropics_shape(
    tmp_path: Path,
) -> None:
    processor = Processor(_settings(tmp_path, "upstream: {messages: native}\n"))
    answers = await processor.process(
        header_message("/v1/messages", headers=ANTHROPIC), body_message(MESSAGES_BODY)
    )
    assert answers[1].WhichOneof("response") == "request_body"
    assert not answers[1].request_body.response.HasField("body_mutation")
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    answers = await processor.process(
        header_message("/v1/messages", headers=ANTHROPIC),
        body_message({**MESSAGES_BODY, "tools": tools}),
    )
    status, error, headers = _anthropic_error(answers[1])
    assert (status, error["error"]["type"]) == (400, "invalid_request_error")
    assert error["error"]["message"].startswith("tools: ")
    assert headers["request-id"] == b"req-1"
    record = processor.records[-1]
    assert (record.route, record.status, record.verdict) == ("/v1/messages", 400, "rejected")
