"""The external processor fed ProcessingRequest messages without gRPC or Envoy: the
messages Envoy sends for one HTTP request, and the ProcessingResponse messages the
processor answers (``process``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from envoy.config.core.v3 import base_pb2 as core
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext

from gateway.extproc.server import Processing, build
from gateway.extproc.stream import ExternalProcessor
from gateway.observe.exchange import Exchange
from gateway.settings import Settings


def header_message(
    path: str,
    *,
    method: str = "POST",
    headers: Mapping[str, str] | None = None,
    end_of_stream: bool = False,
    response: bool = False,
) -> Any:
    """The request_headers (``response``: response_headers) message of one request."""
    pairs = [(":method", method), (":path", path), (":authority", "gateway"), (":scheme", "http")]
    if response:
        pairs = []
    pairs += list((headers or {}).items())
    header_map = core.HeaderMap(
        headers=[core.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs]
    )
    message = ext.HttpHeaders(headers=header_map, end_of_stream=end_of_stream)
    if response:
        return ext.ProcessingRequest(response_headers=message)
    return ext.ProcessingRequest(request_headers=message)


def body_message(body: bytes | dict[str, Any], *, end_of_stream: bool = True) -> Any:
    """The request_body message (a dict: as JSON)."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return ext.ProcessingRequest(request_body=ext.HttpBody(body=raw, end_of_stream=end_of_stream))


class Processor:
    """A processor built from ``settings`` as ``ft-gateway extproc`` builds it, its
    records kept (``records``)."""

    def __init__(self, settings: Settings, *, span_exporter: Any = None) -> None:
        self.built: Processing = build(settings, span_exporter=span_exporter)
        self.records: list[Exchange] = []
        if span_exporter is None:
            self.built.state.observer = self
        self.service = ExternalProcessor(self.built.decider)

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        self.records.append(exchange)

    async def process(self, *messages: Any) -> list[Any]:
        """The processor's answers to ``messages`` (one HTTP request's), in order."""

        async def requests() -> AsyncIterator[Any]:
            for message in messages:
                yield message

        return [answer async for answer in self.service.Process(requests(), None)]


def set_headers(answer: Any) -> dict[str, bytes]:
    """The headers a body or headers answer sets, by name."""
    kind = answer.WhichOneof("response")
    common = getattr(answer, kind).response
    return {h.header.key: h.header.raw_value for h in common.header_mutation.set_headers}
