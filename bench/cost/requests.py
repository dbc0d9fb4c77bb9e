"""Scenarios of whole requests through the gateway in process (bench/cost/gateway.py):
one request at a time, the cases interleaved round by round.

- ``fanout``: a request with ``n`` against the same without, JSON, streamed (64 chunks
  at once: the merge sees whole blocks) and paced (1 ms apart, each chunk on its own);
- ``responses``: the same question on ``/v1/responses`` (translated onto chat, the
  answer rebuilt, each chunk turned into Responses events) against chat, no store;
- ``store``: a Responses first turn with no store, kept in SQLite (a write), and a
  second turn continuing it (a read and a write); then the store's own put and get;
- ``limits``: CPU per request with rate limits off, and on through each store (local,
  shared by workers, a Redis of the run's own), and streams not metered;
- ``tracing``: tracing off, on with every trace sampled and 1 in 100, in front of an
  engine in this process (bench/instant.py), spans encoded to OTLP protobuf and
  dropped; each timing ends with a flush, so an export counts in its case;
- ``memory``: what each request kind of bench/callcounter.py holds (tracemalloc), the
  embeddings answer at its full width, and its CPU time.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from bench.callcounter import KINDS
from bench.cost.gateway import Request, open_app, request_call, settings, through_gateway
from bench.cost.scenario import Case, Context, Scenario
from bench.inprocess import Call
from bench.instant import MODEL, InstantEngine
from gateway.responses.shape import message_item, response_object
from gateway.responses.sqlitestore import SqliteStore
from gateway.responses.store import StoredResponse
from gateway.settings import load_settings
from gateway.upstream.engines import Engine, Engines

ROOT = Path(__file__).resolve().parents[2]
RESPONSES_ROUTE = "/v1/responses"
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "Tell me about cats."}],
    "max_tokens": 64,
}
STREAM = {**BODY, "stream": True}
# The engine's 64 chunks one millisecond apart: each arrives on its own, as from a real
# engine, where the whole stream at once (no pause) shows the most merging.
PACED = ((b"x-fake-chunk-delay-ms", b"1"),)
FIRST_TURN: dict[str, Any] = {
    "model": BODY["model"],
    "input": BODY["messages"][0]["content"],
    "max_output_tokens": BODY["max_tokens"],
}
ONE_AT_A_TIME = "one request at a time (paced streams: 64 chunks 1 ms apart)"
REQUEST = {
    "case": "request",
    "cpu_us": "CPU us/request",
    "p50_us ratio": "latency ratio",
    "cpu_us ratio": "CPU ratio",
    "+cpu_us": "added CPU us",
}


def _fanout(ctx: Context) -> list[Request]:
    n = ctx.option("n")
    return [
        Request("json single", BODY),
        Request(f"json n={n}", BODY | {"n": n}, base="json single"),
        Request("stream single", STREAM),
        Request(f"stream n={n}", STREAM | {"n": n}, base="stream single"),
        Request("paced stream single", STREAM, headers=PACED, share=10),
        Request(
            f"paced stream n={n}",
            STREAM | {"n": n},
            headers=PACED,
            share=10,
            base="paced stream single",
        ),
    ]


FANOUT = Scenario(
    "fanout",
    f"n by fan-out beside a single request, through the gateway to the fake engine, "
    f"{ONE_AT_A_TIME}",
    through_gateway(_fanout),
    compare=("p50_us", "cpu_us"),
    options={"n": 3, "client": ""},
    labels=REQUEST,
)


def _responses(ctx: Context) -> list[Request]:
    rows = []
    for kind, extra, headers, share in (
        ("json", {}, (), 1),
        ("stream", {"stream": True}, (), 1),
        ("paced stream", {"stream": True}, PACED, 10),
    ):
        chat = Request(f"{kind} chat", BODY | extra, headers=headers, share=share)
        rows.append(chat)
        rows.append(
            Request(
                f"{kind} responses",
                FIRST_TURN | extra,
                RESPONSES_ROUTE,
                headers,
                share=share,
                base=chat.name,
            )
        )
    return rows


RESPONSES = Scenario(
    "responses",
    f"the Responses route beside chat for the same question, no store, {ONE_AT_A_TIME}",
    through_gateway(_responses),
    compare=("p50_us", "cpu_us"),
    options={"client": ""},
    labels=REQUEST,
)


@contextlib.asynccontextmanager
async def _store(ctx: Context) -> AsyncIterator[list[Case]]:
    bearer = ((b"authorization", b"Bearer sk-bench"),)
    first = Request("first turn, store none", FIRST_TURN, RESPONSES_ROUTE, bearer)
    async with contextlib.AsyncExitStack() as stack:
        bare = await open_app(stack, settings(ctx.engine_url()))
        database: dict[tuple[str, ...], Any] = {
            ("store", "backend"): "sqlite",
            ("store", "path"): ctx.directory / "r.db",
        }
        kept = await open_app(stack, settings(ctx.engine_url(), database))
        exchange = Call(first.encoded(), list(bearer), RESPONSES_ROUTE)
        answer: list[bytes] = []

        async def keep(message: MutableMapping[str, Any]) -> None:
            answer.append(message.get("body", b""))
            await exchange.send(message)

        await kept(exchange.scope, exchange.receive, keep)
        earlier = orjson.loads(b"".join(answer))["id"]
        second = FIRST_TURN | {"previous_response_id": earlier, "input": "And?"}
        store = SqliteStore(ctx.directory / "calls.db", 86400)
        stack.push_async_callback(store.aclose)
        yield [
            Case(first.name, request_call(bare, first)),
            Case(
                "first turn, SQLite (write)",
                request_call(kept, first),
                base=first.name,
            ),
            Case(
                "second turn, SQLite (read + write)",
                request_call(kept, Request("second", second, RESPONSES_ROUTE, bearer)),
                base=first.name,
            ),
            *_store_calls(store),
        ]


def _store_calls(store: SqliteStore) -> list[Case]:
    """The store's own put and get, without the gateway around them."""
    text = "Cats are small carnivorous mammals. " * 10
    numbers = itertools.count()
    written: list[str] = []
    reads = itertools.count()

    async def put() -> None:
        response_id = f"resp_{next(numbers):048x}"
        output = [message_item("msg_1", text, status="completed")]
        answer = response_object(
            response_id, FIRST_TURN, created_at=0, status="completed", output=output
        )
        item = {"type": "message", "role": "user", "content": FIRST_TURN["input"]}
        await store.put(StoredResponse("token:x", answer, [item], []))
        written.append(response_id)

    async def get() -> None:
        if await store.get(written[next(reads) % len(written)], "token:x") is None:
            raise SystemExit("the store lost a response it was given")

    return [Case("store.put (one answer)", put), Case("store.get (one continuation)", get)]


STORE = Scenario(
    "store",
    "the Responses route with no store and with the SQLite store (WAL, synchronous "
    "NORMAL, a temporary file), one request at a time; then the store's own calls",
    _store,
    rounds=5,
    added=("cpu_us",),
    compare=(),
    labels=REQUEST,
)

HIGH = {
    "requests_per_minute": 10**9,
    "tokens_per_minute": 10**12,
    "tokens_per_day": 10**13,
    "concurrent_requests": 10**6,
}


def limits_config(store: str, url: str) -> dict[str, Any]:
    """The ``rate_limits`` section for ``store`` (``shared`` is ``local`` with workers)."""
    config: dict[str, Any] = {"default": HIGH}
    if store == "redis":
        config |= {"store": "redis", "redis": {"url": url, "timeout": 0.5}}
    return config


def _limits(ctx: Context) -> list[Request]:
    rows = []
    for kind, body in (("json", BODY), ("stream", STREAM)):
        off = Request(f"{kind}: limits off", body)
        rows.append(off)
        for store in ("local", "shared", "redis"):
            rows.append(
                Request(
                    f"{kind}: limits on, {store}",
                    body,
                    settings={("rate_limits",): _limits_of(store)},
                    workers=store == "shared",
                    base=off.name,
                )
            )
        unmetered: dict[tuple[str, ...], Any] = {("metering", "stream_usage"): False}
        rows.append(Request(f"{kind}: streams unmetered", body, settings=unmetered, base=off.name))
    return rows


def _limits_of(store: str) -> Any:
    if store == "redis":  # the run's own Redis, started when this case is built
        return lambda ctx: limits_config(store, ctx.redis_url())
    return limits_config(store, "")


LIMITS = Scenario(
    "limits",
    "whole requests through the gateway to the fake engine with rate limits off and on "
    "(one key, all four limits, never refusing), through each store",
    through_gateway(_limits),
    figures=("cpu_us",),
    added=("cpu_us",),
    compare=(),
    labels=REQUEST,
)


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


TRACING_CASES = {"off": None, "on, ratio 1.0": 1.0, "on, ratio 0.01": 0.01}
TRACED = {
    "chat": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
             "temperature": 0.7, "max_tokens": 64},
    "chat, stream": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                     "stream": True, "stream_options": {"include_usage": True}},
}  # fmt: skip


@contextlib.asynccontextmanager
async def _tracing(ctx: Context) -> AsyncIterator[list[Case]]:
    chosen = [label for label in TRACING_CASES if ctx.wanted(label)]
    exporters: dict[str, EncodingExporter] = {}
    tracers: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        cases = []
        for label in chosen:
            ratio = TRACING_CASES[label]
            overrides: dict[tuple[str, ...], Any] = {
                ("policy",): str(ROOT / "policies" / "ft-serve.yaml"),
                ("log", "requests"): False,
            }
            kwargs: dict[str, Any] = {}
            if ratio is not None:  # off builds as before tracing existed (a baseline runs it)
                overrides[("tracing", "enabled")] = True
                overrides[("tracing", "sample_ratio")] = ratio
                overrides[("tracing", "queue_size")] = max(2048, 4 * ctx.number)
                kwargs["span_exporter"] = exporters.setdefault(label, EncodingExporter())
            app = await open_app(
                stack, load_settings(None, overrides=overrides, environ={}), **kwargs
            )
            app.state.gateway.engines = Engines(Engine("", InstantEngine(), "in-process"))
            tracer = tracers[label] = getattr(app.state.gateway, "tracer", None)
            for kind, body in TRACED.items():
                name = f"{label}: {kind}"
                flush = tracer.provider.force_flush if tracer is not None else None
                call = request_call(app, Request(name, body))
                base = f"off: {kind}" if label != "off" else None
                cases.append((list(TRACED).index(kind), Case(name, call, base=base, finish=flush)))
        yield [case for _, case in sorted(cases, key=lambda pair: pair[0])]
        for label, exporter in exporters.items():
            if TRACING_CASES[label] == 1.0 and exporter.spans == 0:
                raise SystemExit("tracing at ratio 1.0 exported no span")
        for label, tracer in tracers.items():
            if tracer is not None and tracer.dropped:
                raise SystemExit(f"{label}: {tracer.dropped} spans dropped: the figures are low")


TRACING = Scenario(
    "tracing",
    "tracing off, on (every trace sampled) and sampled 1 in 100, through the gateway in "
    "process to an engine in this process (spans encoded to OTLP protobuf, dropped)",
    _tracing,
    figures=("wall_us",),
    compare=("wall_us",),
    added=("wall_us",),
    number=1000,
    labels={"case": "tracing: request", "wall_us": "us per request"},
)


def _memory(ctx: Context) -> list[Request]:
    # The embeddings answer at its full width (16 vectors of 1,536 floats), not the
    # narrow one bench/callcount.py asks for.
    return [Request(kind.name, kind.body, kind.path) for kind in KINDS]


MEMORY = Scenario(
    "memory",
    "what a request holds (tracemalloc, above what was allocated before it: while its "
    "answer is written, at its peak, kept after) and its CPU time, each request kind of "
    "bench/callcounter.py through the gateway to the fake engine",
    through_gateway(_memory, sample=True),
    figures=("answering", "peak", "kept", "cpu_us"),
    rounds=3,
    compare=(),
    labels=REQUEST,
)
