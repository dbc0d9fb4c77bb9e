"""The observers of a data plane's requests, from the settings: the metrics, the access
log when ``log.requests``, the tracer when ``tracing.enabled``. ``serve``'s app factory
and ``extproc`` build them here, so both record a request the same way."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from gateway.observe.exchange import Observer, Observers, Tracer
from gateway.observe.logs import AccessLog
from gateway.observe.metrics import Metrics
from gateway.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


def make_observers(
    settings: Settings, metrics: Metrics, *, span_exporter: SpanExporter | None = None
) -> tuple[Observer, Tracer | None]:
    """The observer every finished request goes to, and the tracer (None: tracing off);
    ``span_exporter``: where spans go instead of OTLP."""
    observers: list[Observer] = [metrics]
    if settings.log.requests:
        observers.append(AccessLog(format=settings.log.format))
    tracer: Tracer | None = None
    if settings.tracing.enabled:
        # Imported by name: with tracing off the OpenTelemetry SDK is never loaded.
        tracing = importlib.import_module("gateway.observe.tracing")
        traced = cast(Tracer, tracing.Tracing(settings.tracing, exporter=span_exporter))
        metrics.spans_dropped = lambda: traced.dropped
        observers.append(traced)
        tracer = traced
    return (observers[0] if len(observers) == 1 else Observers(*observers)), tracer
