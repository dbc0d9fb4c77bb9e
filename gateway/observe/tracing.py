"""OpenTelemetry traces: one span per request in the GenAI semantic conventions.

Built only when ``tracing.enabled`` (the factory imports this module then, and
only then: with tracing off the SDK is never loaded and the proxy pays one
``exchange.trace is None`` test per place below). The endpoint calls ``begin``
when a request arrives, which continues a valid W3C ``traceparent`` from the
client; ``upstream_headers`` opens the child span of the engine request and
puts its ``traceparent`` on it (replacing the client's); ``Trace.answer`` and
``Trace.events`` read usage and finish reasons from what the proxy already
holds (the JSON answer, the stream's whole events: chat's, or the Messages API's
of an engine that serves it natively). ``finished`` (the Observer
protocol) sets the attributes and ends the spans. Spans leave through the SDK's
BatchSpanProcessor: a thread exports them, and a full queue drops them (counted
in ``dropped``), so a collector that is slow or gone never holds up a request.
No prompt or completion text is recorded unless ``capture_content``; headers
(the API key among them) never are.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway import __version__
from gateway._types import Headers
from gateway.observe.exchange import Exchange, TraceHooks
from gateway.routes import ROUTES
from gateway.settings import Tracing as TracingSettings

OPERATIONS = {row.path: row.operation for row in ROUTES.values()}
_INPUT_ONLY = frozenset(row.path for row in ROUTES.values() if not row.max_tokens)
# Request fields -> GenAI attribute names (gen_ai.request.*), when the client set them.
REQUEST_FIELDS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",  # the Responses API's name
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
    "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",  # the Messages API's name
    "encoding_format": "gen_ai.request.encoding_formats",
    "dimensions": "gen_ai.embeddings.dimension.count",
}
_LISTED = ("stop", "encoding_format")  # string[] attributes a client may send as one string
_TRACE_HEADERS = (b"traceparent", b"tracestate")
# As the access log: a client's fields are many and long at will, an attribute is not.
MAX_FIELDS = 64
MAX_NAME = 100
_PROPAGATOR = TraceContextTextMapPropagator()


def _trace_of(exchange: Exchange) -> Trace | None:
    hooks: TraceHooks | None = exchange.trace
    return hooks if isinstance(hooks, Trace) else None


def _scalar(value: Any) -> Any:
    """``value`` as an attribute value, or None if it cannot be one."""
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


class Trace:
    """One request's spans, and what the answer said (usage, finish reasons)."""

    __slots__ = (
        "span",
        "upstream",
        "recording",
        "capture",
        "base_ns",
        "base_perf",
        "response_model",
        "response_id",
        "finish_reasons",
        "output",
        "attributes",
    )

    def __init__(self, span: trace.Span, *, base_ns: int, base_perf: float, capture: bool) -> None:
        self.span = span
        self.upstream: trace.Span | None = None
        self.recording = span.is_recording()
        self.capture = capture
        # One clock for every time the spans carry (starts, events, ends): perf_counter
        # times, placed on the wall clock by one pair of readings. The SDK's own clock
        # (time_ns at start_span, at end) would put an event stamped from a perf_counter
        # time outside its span whenever the two readings drift apart under load.
        self.base_ns = base_ns
        self.base_perf = base_perf
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: dict[int, str] = {}
        self.output: dict[int, list[str]] = {}
        self.attributes: dict[str, Any] = {}  # the gateway span's, set once at its end

    def ns(self, perf: float) -> int:
        """A ``perf_counter`` time as Unix nanoseconds (what spans take)."""
        return self.base_ns + int((perf - self.base_perf) * 1e9)

    def now(self) -> int:
        """Now, as ``ns`` gives it."""
        return self.ns(time.perf_counter())

    def answer(self, body: Any) -> None:
        """Read a whole answer, parsed (only when this trace records)."""
        if self.recording and isinstance(body, dict):
            self._read(body, stream=False)

    def chunks(self, chunks: list[Any]) -> None:
        """Read a stream's chunks, parsed (only when this trace records)."""
        if not self.recording:
            return
        for body in chunks:
            self._read(body, stream=True)

    def _read(self, body: dict[str, Any], *, stream: bool) -> None:
        model, rid = body.get("model"), body.get("id")
        if isinstance(model, str):
            self.response_model = model
        if isinstance(rid, str):
            self.response_id = rid
        choices = body.get("choices")
        if not isinstance(choices, list):
            if "type" in body:
                self._read_message(body)
            return
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            index = index if isinstance(index, int) else 0
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self.finish_reasons[index] = reason
            if self.capture:
                text = _choice_text(choice, stream=stream)
                if text:
                    self.output.setdefault(index, []).append(text)

    def _read_message(self, body: dict[str, Any]) -> None:
        """An answer of Anthropic's Messages API (an engine's own, in native mode): the
        message whole, or its stream's events."""
        kind = body.get("type")
        if kind == "message_start" and isinstance(body.get("message"), dict):
            self._read(body["message"], stream=True)
            return
        holder = body.get("delta") if kind == "message_delta" else body
        if isinstance(holder, dict) and isinstance(holder.get("stop_reason"), str):
            self.finish_reasons[0] = holder["stop_reason"]
        if not self.capture:
            return
        if kind == "message":
            blocks = body.get("content")
            for block in blocks if isinstance(blocks, list) else ():
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    self.output.setdefault(0, []).append(block["text"])
        elif kind == "content_block_delta" and isinstance(body.get("delta"), dict):
            text = body["delta"].get("text")
            if isinstance(text, str):
                self.output.setdefault(0, []).append(text)


def _choice_text(choice: dict[str, Any], *, stream: bool) -> str | None:
    if isinstance(choice.get("text"), str):
        return str(choice["text"])
    message = choice.get("delta" if stream else "message")
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return str(message["content"])
    return None


class _CountingExporter(SpanExporter):
    """An exporter that counts the spans of every export that failed (they are lost)."""

    def __init__(self, inner: SpanExporter, tracing: Tracing) -> None:
        self.inner = inner
        self.tracing = tracing

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.tracing.count_dropped(len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _CountingQueue(collections.deque[Any]):
    """The SDK's span queue, counting what a full queue drops. The SDK checks "full"
    and then appends, while its export thread pops: a check outside the queue counted
    a span dropped that a pop had just made room for. Here the check, the append and
    the pop hold one lock, so every count is a span really lost."""

    def __init__(self, maxlen: int, tracing: Tracing) -> None:
        super().__init__((), maxlen)
        self._tracing = tracing
        self._lock = threading.Lock()

    def appendleft(self, span: Any) -> None:
        with self._lock:
            if len(self) == self.maxlen:
                self._tracing.count_dropped(1)  # the deque drops its oldest span
            super().appendleft(span)

    def pop(self, *index: int) -> Any:
        with self._lock:
            return super().pop(*index)


def _count_drops(batch: BatchSpanProcessor, tracing: Tracing, queue_size: int) -> None:
    inner = getattr(batch, "_batch_processor", None)
    # The SDK's private queue: the tests (test_tracing.py) fail if a release moves it.
    if inner is not None and isinstance(getattr(inner, "_queue", None), collections.deque):
        inner._queue = _CountingQueue(queue_size, tracing)


class Tracing:
    """The tracer provider and the Observer that ends each request's spans."""

    def __init__(self, settings: TracingSettings, *, exporter: SpanExporter | None = None) -> None:
        self.settings = settings
        self.dropped = 0
        self._lock = threading.Lock()
        attributes: dict[str, str] = {SERVICE_VERSION: __version__}
        if settings.service_name is not None:
            attributes[SERVICE_NAME] = settings.service_name
        elif not os.environ.get("OTEL_SERVICE_NAME"):
            attributes[SERVICE_NAME] = "ft-gateway"
        sampler = None  # the SDK's own: OTEL_TRACES_SAMPLER, else parent-based always-on
        if settings.sample_ratio is not None:
            sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self.provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler)
        if exporter is None:
            exporter = OTLPSpanExporter(endpoint=settings.endpoint, timeout=settings.export_timeout)
        batch = BatchSpanProcessor(
            _CountingExporter(exporter, self),
            max_queue_size=settings.queue_size,
            max_export_batch_size=min(512, settings.queue_size),
            schedule_delay_millis=settings.schedule_delay * 1000,
            export_timeout_millis=settings.export_timeout * 1000,
        )
        _count_drops(batch, self, settings.queue_size)
        self.provider.add_span_processor(batch)
        self.tracer = self.provider.get_tracer("ft-gateway", __version__)

    def count_dropped(self, n: int) -> None:
        """Count ``n`` spans lost (a full queue, a failed export); any thread."""
        with self._lock:
            self.dropped += n

    def begin(self, exchange: Exchange, headers: Headers) -> None:
        """Open the request's span, continuing the client's trace if it sent a valid one."""
        carrier = {n.decode(): v.decode("latin-1") for n, v in headers if n in _TRACE_HEADERS}
        parent = _PROPAGATOR.extract(carrier) if carrier else None
        operation = OPERATIONS.get(exchange.route or "")
        base_ns, base_perf = time.time_ns(), time.perf_counter()
        span = self.tracer.start_span(
            operation or f"{exchange.method} {exchange.path}",
            context=parent,
            kind=SpanKind.SERVER,
            start_time=base_ns + int((exchange.started - base_perf) * 1e9),
        )
        exchange.trace = Trace(
            span, base_ns=base_ns, base_perf=base_perf, capture=self.settings.capture_content
        )

    def request(self, exchange: Exchange, body: dict[str, Any]) -> None:
        """Record the request's model and the parameters the client set."""
        trace_ = _trace_of(exchange)
        if trace_ is None or not trace_.recording:
            return
        attributes = trace_.attributes
        model = body.get("model")
        operation = OPERATIONS.get(exchange.route or "")
        if isinstance(model, str):
            attributes["gen_ai.request.model"] = model
            if operation is not None:
                trace_.span.update_name(f"{operation} {model}")
        for name, attribute in REQUEST_FIELDS.items():
            value = _scalar(body.get(name))
            if name in _LISTED and isinstance(value, str):
                value = [value]
            if value is not None:
                attributes[attribute] = value
        if self.settings.capture_content:
            content = body.get("messages", body.get("prompt"))
            if content is not None:
                attributes["gen_ai.input.messages"] = orjson.dumps(content).decode()

    def upstream_headers(self, exchange: Exchange, headers: Headers) -> Headers:
        """Open the engine request's span; ``headers`` with its traceparent instead of
        the client's. An unsampled trace gets no child span: the engine is told the
        gateway span's context (unsampled), which costs a span less."""
        trace_ = _trace_of(exchange)
        if trace_ is None:
            return headers
        context = trace.set_span_in_context(trace_.span)
        if trace_.recording:
            name = getattr(trace_.span, "name", "engine")
            upstream = self.tracer.start_span(
                name, context=context, kind=SpanKind.CLIENT, start_time=trace_.now()
            )
            trace_.upstream = upstream
            context = trace.set_span_in_context(upstream)
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=context)
        out = [(n, v) for n, v in headers if n not in _TRACE_HEADERS]
        out.extend((k.encode(), v.encode()) for k, v in carrier.items())
        return out

    # The Observer protocol.

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        trace_ = _trace_of(exchange)
        if trace_ is None:
            return
        end = trace_.now()
        span, upstream = trace_.span, trace_.upstream
        if not trace_.recording:
            span.end(end)
            return
        # Attributes set at once: the SDK takes a lock per set_attribute call.
        attributes = trace_.attributes
        _request_attributes(attributes, exchange)
        answer = _answer_attributes(trace_, exchange)
        attributes.update(answer)
        if exchange.outcomes:
            attributes["ft_gateway.policy.fields"] = [
                f"{o.field[:MAX_NAME]}:{o.action}" for o in exchange.outcomes[:MAX_FIELDS]
            ]
        verdict = exchange.verdict
        if verdict is not None:
            attributes["ft_gateway.policy.verdict"] = verdict
            at = exchange.upstream_started
            span.add_event(
                "ft_gateway.policy",
                {
                    "ft_gateway.policy.verdict": verdict,
                    "ft_gateway.policy.outcomes": len(exchange.outcomes),
                },
                timestamp=trace_.ns(at) if at is not None else end,
            )
        if exchange.report is not None:
            _record_report(span, attributes, exchange, end)
        if exchange.answers:
            _record_answers(span, attributes, exchange, end)
        if exchange.client_disconnected:
            attributes["ft_gateway.client_disconnected"] = True
            span.add_event("ft_gateway.client_disconnected", timestamp=end)
        error = exchange.error_code
        if error is not None:
            attributes["error.type"] = error
        span.set_attributes(attributes)
        if error is not None or exchange.status >= 500:
            span.set_status(Status(StatusCode.ERROR, error))
        if upstream is not None:
            if exchange.upstream_status is not None:
                answer["http.response.status_code"] = exchange.upstream_status
            upstream.set_attributes(answer)
            if exchange.first_byte is not None:
                upstream.add_event(
                    "ft_gateway.first_byte", timestamp=trace_.ns(exchange.first_byte)
                )
            if error is not None and exchange.upstream_status is None:
                upstream.set_status(Status(StatusCode.ERROR, error))
            upstream.end(end)
        span.end(end)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Export what is waiting, then stop, for ``timeout`` seconds at most. Blocks:
        call it off the event loop."""
        # The SDK's flush does not bound itself (each export is bounded, not their
        # number): on a thread of its own, given up on past ``timeout``.
        stopping = threading.Thread(target=self._stop, name="ft-gateway-tracing-stop", daemon=True)
        stopping.start()
        stopping.join(timeout)

    def _stop(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


def _record_answers(span: Any, attributes: dict[str, Any], exchange: Exchange, end: int) -> None:
    """What the answer checks found: the codes as an attribute, an event for each."""
    attributes["ft_gateway.answer.violation"] = [
        f"{v.code}:{'enforced' if v.enforced else 'reported'}" for v in exchange.answers
    ][:MAX_FIELDS]
    for violation in exchange.answers[:MAX_FIELDS]:
        event = {
            "ft_gateway.answer.check": violation.check,
            "error.type": violation.code or "",
            "ft_gateway.answer.param": (violation.param or "")[:MAX_NAME],
            "ft_gateway.answer.keyword": violation.keyword or "",
            "ft_gateway.answer.enforced": violation.enforced,
        }
        span.add_event("ft_gateway.answer.violation", event, timestamp=end)


def _record_report(span: Any, attributes: dict[str, Any], exchange: Exchange, end: int) -> None:
    """What report-only rules would have refused: attributes, and one event with the
    400 the client would have got (its status, code and param)."""
    report = exchange.report
    if report is None:
        return
    attributes["ft_gateway.policy.reported"] = [
        f"{o.field[:MAX_NAME]}:{o.detail}" for o in report.fields[:MAX_FIELDS]
    ]
    error = report.error
    event: dict[str, Any] = {
        "http.response.status_code": error.status,
        "error.type": error.code or "invalid_request_error",
    }
    if error.param is not None:
        event["ft_gateway.policy.param"] = error.param[:MAX_NAME]
    span.add_event("ft_gateway.policy.reported", event, timestamp=end)


def _request_attributes(attributes: dict[str, Any], exchange: Exchange) -> None:
    operation = OPERATIONS.get(exchange.route or "")
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    attributes["http.request.method"] = exchange.method
    attributes["url.path"] = exchange.path
    if exchange.route is not None:
        attributes["http.route"] = exchange.route
    if exchange.status:
        attributes["http.response.status_code"] = exchange.status
    attributes["ft_gateway.request_id"] = exchange.request_id
    attributes["ft_gateway.stream"] = exchange.stream
    attributes["ft_gateway.bytes_out"] = exchange.bytes_out
    if exchange.client is not None:
        attributes["ft_gateway.client"] = exchange.client
    if exchange.upstream_status is not None:
        attributes["ft_gateway.upstream.status"] = exchange.upstream_status
    if exchange.upstream_replica is not None:
        attributes["ft_gateway.upstream.replica"] = exchange.upstream_replica


def _answer_attributes(trace_: Trace, exchange: Exchange) -> dict[str, Any]:
    """What the answer said, for the gateway span and the engine span alike (the usage
    as the request's record holds it: read once, by the route)."""
    out: dict[str, Any] = {}
    if trace_.response_model is not None:
        out["gen_ai.response.model"] = trace_.response_model
    if trace_.response_id is not None:
        out["gen_ai.response.id"] = trace_.response_id
    usage = exchange.usage
    if usage is not None:
        out["gen_ai.usage.input_tokens"] = usage.prompt
        if exchange.route not in _INPUT_ONLY:  # embeddings generate no tokens
            out["gen_ai.usage.output_tokens"] = usage.completion
    if trace_.finish_reasons:
        reasons = [trace_.finish_reasons[i] for i in sorted(trace_.finish_reasons)]
        out["gen_ai.response.finish_reasons"] = reasons
    if trace_.output:
        texts = ["".join(trace_.output[i]) for i in sorted(trace_.output)]
        out["gen_ai.output.messages"] = orjson.dumps(texts).decode()
    return out
