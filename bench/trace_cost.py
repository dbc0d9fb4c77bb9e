"""The cost of tracing per request: off, on with every trace sampled, on with 1 in 100.

``python -m bench.trace_cost [--rounds N] [--number N]``

Three gateways built by ``create_app`` (the default policy, metrics, no access
log) are called in process as raw ASGI apps, with hand-written ``receive`` and
``send``, in front of an in-process engine (an UpstreamClient that answers at
once, with no socket): what is timed is the gateway's own work per request,
which is where tracing adds. With tracing on, spans go through the SDK's
BatchSpanProcessor to an exporter that encodes each batch to OTLP protobuf
(what the OTLP/HTTP exporter sends) and discards it, so the export thread's
encoding competes for the interpreter as it would, but no socket is timed.
Each timing of a traced gateway ends with a flush of its spans, so that their
export counts in its case and not in the next one. The three run interleaved
round by round so that a noisy machine slows them alike; the table gives
median microseconds per request, for a chat completion and for a streamed one
(three events and a usage chunk), and the ratio to off.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from starlette.applications import Starlette

from bench.instant import MODEL, InstantEngine
from bench.table import format_number, markdown
from gateway._types import Message
from gateway.app.factory import create_app
from gateway.settings import load_settings
from gateway.upstream.engines import Engine, Engines

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "/v1/chat/completions"
CASES = {"off": None, "on, ratio 1.0": 1.0, "on, ratio 0.01": 0.01}


class EncodingExporter(SpanExporter):
    """Encodes each batch to OTLP protobuf, as the OTLP exporter does, and drops it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def build(ratio: float | None, *, number: int) -> tuple[Starlette, EncodingExporter]:
    """A gateway with tracing off (``ratio`` None) or on at ``ratio``, its queue long
    enough for the spans of ``number`` requests (two each): none is dropped."""
    overrides: dict[tuple[str, ...], Any] = {
        ("policy",): str(ROOT / "policies" / "ft-serve.yaml"),
        ("log", "requests"): False,
    }
    if ratio is not None:
        overrides[("tracing", "enabled")] = True
        overrides[("tracing", "sample_ratio")] = ratio
        overrides[("tracing", "queue_size")] = max(2048, 2 * number)
    exporter = EncodingExporter()
    settings = load_settings(None, overrides=overrides, environ={})
    if ratio is None:  # as the gateway was before tracing existed (``--only off`` runs there)
        return create_app(settings), exporter
    return create_app(settings, span_exporter=exporter), exporter


async def _call(app: Starlette, body: bytes) -> int:
    scope = {
        "type": "http",
        "method": "POST",
        "path": ROUTE,
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
        ],
    }
    sent = False
    status = 0
    idle = asyncio.Event()

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await idle.wait()  # the client never leaves
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _time(app: Starlette, body: bytes, number: int) -> float:
    tracer = getattr(app.state.gateway, "tracer", None)  # (none before tracing existed)
    start = time.perf_counter()
    for _ in range(number):
        await _call(app, body)
    if tracer is not None:
        # The export of these spans is part of their cost, and must not run on into
        # the next case's timing.
        tracer.provider.force_flush()
    return (time.perf_counter() - start) / number


async def measure(
    *, rounds: int, number: int, only: Sequence[str] = tuple(CASES)
) -> list[dict[str, Any]]:
    """One row per case (those in ``only``, off among them) and body: median us per
    request over ``rounds``."""
    apps = {label: build(CASES[label], number=number) for label in CASES if label in only}
    bodies = {
        "chat": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                 "temperature": 0.7, "max_tokens": 64},
        "chat, stream": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                         "stream": True, "stream_options": {"include_usage": True}},
    }  # fmt: skip
    rows = []
    async with contextlib.AsyncExitStack() as stack:
        for app, _ in apps.values():
            await stack.enter_async_context(app.router.lifespan_context(app))
            app.state.gateway.engines = Engines(Engine("", InstantEngine(), "in-process"))
        for kind, payload in bodies.items():
            body = orjson.dumps(payload)
            for app, _ in apps.values():
                if await _call(app, body) != 200:
                    raise SystemExit(f"the bench request was not answered 200 ({kind})")
            times: dict[str, list[float]] = {label: [] for label in apps}
            for _ in range(rounds):
                for label, (app, _) in apps.items():
                    times[label].append(await _time(app, body, number))
            off = statistics.median(times["off"]) * 1e6
            for label in apps:
                us = statistics.median(times[label]) * 1e6
                rows.append({"request": kind, "tracing": label, "us": us, "added_us": us - off,
                             "ratio": us / off})  # fmt: skip
    for label, (app, exporter) in apps.items():
        tracer = getattr(app.state.gateway, "tracer", None)
        if CASES[label] == 1.0 and exporter.spans == 0:
            raise SystemExit("tracing at ratio 1.0 exported no span")
        if tracer is not None and tracer.dropped:
            raise SystemExit(f"{label}: {tracer.dropped} spans dropped: the figures are low")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=1000, help="requests per timing")
    parser.add_argument(
        "--only",
        choices=["off"],
        help="tracing off alone: runs on a checkout from before tracing, to compare",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.number < 1:
        parser.error("--rounds and --number must be at least 1")
    only = ["off"] if args.only else list(CASES)
    rows = asyncio.run(measure(rounds=args.rounds, number=args.number, only=only))
    header = ["request", "tracing", "us per request", "added us", "ratio to off"]
    table = [
        [r["request"], r["tracing"]] + [format_number(r[k]) for k in ("us", "added_us", "ratio")]
        for r in rows
    ]
    print(f"the gateway in process, {ROUTE}: medians of {args.rounds} rounds of {args.number}")
    print(markdown([header, *table], left=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
