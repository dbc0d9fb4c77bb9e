"""The processor's server run in the test's own loop: its gRPC port answers the health
protocol and an ext_proc stream over a real gRPC channel, and its metrics port serves
what it counted; a stop drains it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import httpx
import orjson
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ext_grpc
from grpc_health.v1 import health_pb2

from gateway.extproc.server import SERVICE, build, serve_extproc
from gateway.settings import load_settings
from tests.support.extproc import body_message, header_message
from tests.support.paths import POLICY
from tests.support.polling import until

pytestmark = pytest.mark.anyio
CHAT = "/v1/chat/completions"


async def test_the_server_answers_health_and_ext_proc_streams(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"policy: {POLICY}\nextproc: {{port: 0}}\nlisten: {{metrics_port: 0}}\n"
        "log: {requests: false}\n"
    )
    built = build(load_settings(config, environ={}))
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="gateway")
    task = asyncio.create_task(serve_extproc(built, stop=stop))
    try:

        def listening() -> list[logging.LogRecord]:
            assert not task.done(), task  # (a start that failed says why here)
            return [r for r in caplog.records if getattr(r, "event", "") == "extproc_listening"]

        await until(lambda: bool(listening()), "the processor listens")
        (line,) = listening()
        port, metrics_port = line.__dict__["grpc_port"], line.__dict__["metrics_port"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            answer = await check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=30)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            messages = [
                header_message(
                    "/v1/chat/completions", headers={"content-type": "application/json"}
                ),
                body_message({**body, "logprobs": True}),
            ]
            stream = ext_grpc.ExternalProcessorStub(channel).Process(iter(messages))
            answers = [a async for a in stream]
        assert answers[0].WhichOneof("response") == "request_headers"
        refused = answers[1].immediate_response
        assert refused.status.code == 400
        assert orjson.loads(refused.body)["error"]["param"] == "logprobs"
        async with httpx.AsyncClient() as client:
            page = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
        assert 'action="rejected",field="logprobs"' in page
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
