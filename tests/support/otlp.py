"""An OTLP/HTTP collector on loopback that decodes what it is sent (the OpenTelemetry
protobuf definitions), so tests read the gateway's spans as a tracing backend would."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.servers import running_server

SERVER, CLIENT = 2, 3  # Span.SpanKind values
STATUS_ERROR = 2


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        out[pair.key] = _value(pair.value)
    return out


@dataclass
class ReceivedSpan:
    """One span as the collector decoded it (ids in hex, as a traceparent writes them)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: dict[str, dict[str, Any]]
    status: int
    resource: dict[str, Any]
    start: int
    end: int
    event_times: dict[str, int] = field(default_factory=dict)


class OtlpReceiver:
    """Accepts ``POST /v1/traces`` and keeps every span; ``wait_for`` one."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.posts = 0
        self._changed = asyncio.Event()
        self.app = Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])

    async def _traces(self, request: Request) -> Response:
        message = ExportTraceServiceRequest.FromString(await request.body())
        self.posts += 1
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes=_attributes(span.attributes),
                            events={e.name: _attributes(e.attributes) for e in span.events},
                            status=span.status.code,
                            resource=resource,
                            start=span.start_time_unix_nano,
                            end=span.end_time_unix_nano,
                            event_times={e.name: e.time_unix_nano for e in span.events},
                        )
                    )
        self._changed.set()
        return Response(
            ExportTraceServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    async def wait_for(self, found: Callable[[list[ReceivedSpan]], bool]) -> list[ReceivedSpan]:
        """The spans received, once ``found`` says they are there."""
        while not found(self.spans):
            self._changed.clear()
            await self._changed.wait()
        return self.spans

    async def trace_of(self, request_id: str, *, spans: int = 2) -> list[ReceivedSpan]:
        """The ``spans`` spans of the trace whose server span has ``request_id``: the
        server span first."""

        def server(all_spans: list[ReceivedSpan]) -> ReceivedSpan | None:
            return next(
                (s for s in all_spans if s.attributes.get("ft_gateway.request_id") == request_id),
                None,
            )

        def complete(all_spans: list[ReceivedSpan]) -> bool:
            root = server(all_spans)
            return root is not None and len(self.of_trace(root.trace_id)) >= spans

        await self.wait_for(complete)
        root = server(self.spans)
        assert root is not None
        return [root, *(s for s in self.of_trace(root.trace_id) if s is not root)]

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        """Every span received of the trace ``trace_id``."""
        return [s for s in self.spans if s.trace_id == trace_id]


@contextlib.asynccontextmanager
async def otlp_receiver() -> AsyncIterator[tuple[OtlpReceiver, str]]:
    """A receiver under uvicorn on a free loopback port; yields it and its traces URL."""
    receiver = OtlpReceiver()
    async with running_server(receiver.app, lifespan="off") as url:
        yield receiver, f"{url}/v1/traces"


class KeptSpans(SpanExporter):
    """A collector in memory: every span exported, in ``spans``."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS
