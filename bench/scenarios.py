"""What the benchmark measures: the scenarios, and the figures each one reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["wrk", "paced", "hold"]
Engine = Literal["fast", "paced", "hold"]

PACED_CHUNK_MS = 20.0
# Long enough that a held stream never gets past its first chunk during a run.
HOLD_CHUNK_MS = 3_600_000.0

CHAT_BODY = (
    b'{"model":"fake-model","messages":[{"role":"user","content":"Say hello"}],"max_tokens":64}'
)
STREAM_BODY = (
    b'{"model":"fake-model","messages":[{"role":"user","content":"Say hello"}],'
    b'"max_tokens":64,"stream":true}'
)


@dataclass(frozen=True)
class Scenario:
    """One load shape against one fake engine."""

    name: str
    kind: Kind
    engine: Engine
    concurrency: int
    stream: bool = False
    # Streams each client times at least (a paced stream takes 64 x 20 ms).
    min_streams: int = 1

    @property
    def body(self) -> bytes:
        """The request body each client posts."""
        return STREAM_BODY if self.stream else CHAT_BODY


SCENARIOS = [
    Scenario("chat-c1", "wrk", "fast", 1),
    Scenario("chat-c32", "wrk", "fast", 32),
    Scenario("chat-c256", "wrk", "fast", 256),
    Scenario("stream-c1", "wrk", "fast", 1, stream=True),
    Scenario("stream-c32", "wrk", "fast", 32, stream=True),
    Scenario("stream-c256", "wrk", "fast", 256, stream=True),
    Scenario("paced-c1", "paced", "paced", 1, stream=True, min_streams=8),
    Scenario("paced-c64", "paced", "paced", 64, stream=True),
    Scenario("hold-1000", "hold", "hold", 1000, stream=True),
]


@dataclass(frozen=True)
class Metric:
    """A figure in the table: its key in a run's record and its label."""

    key: str
    label: str


METRICS: dict[Kind, list[Metric]] = {
    "wrk": [
        Metric("rps", "req/s"),
        Metric("p50_ms", "p50 ms"),
        Metric("p99_ms", "p99 ms"),
        Metric("added_p50_ms", "+p50 ms"),
        Metric("added_p99_ms", "+p99 ms"),
        Metric("cpu_us", "CPU us/req"),
        Metric("peak_rss_mib", "peak RSS MiB"),
        Metric("errors", "errors"),
    ],
    "paced": [
        Metric("streams", "streams timed"),
        Metric("ttfb_p50_ms", "TTFB p50 ms"),
        Metric("ttfb_p99_ms", "TTFB p99 ms"),
        Metric("added_ttfb_p50_ms", "+TTFB p50 ms"),
        Metric("added_ttfb_p99_ms", "+TTFB p99 ms"),
        Metric("gap_p50_ms", "gap p50 ms"),
        Metric("gap_p99_ms", "gap p99 ms"),
        Metric("added_gap_p50_ms", "+gap p50 ms"),
        Metric("added_gap_p99_ms", "+gap p99 ms"),
        Metric("coalesced_pct", "coalesced %"),
        Metric("cpu_us", "CPU us/stream"),
        Metric("peak_rss_mib", "peak RSS MiB"),
        Metric("errors", "errors"),
    ],
    "hold": [
        Metric("opened", "streams open"),
        Metric("idle_rss_mib", "idle RSS MiB"),
        Metric("open_rss_mib", "open RSS MiB"),
        Metric("kib_per_stream", "KiB/stream"),
    ],
}

# Figures that are differences from "direct" in the same round: (new key, base key).
ADDED = [
    ("added_p50_ms", "p50_ms"),
    ("added_p99_ms", "p99_ms"),
    ("added_ttfb_p50_ms", "ttfb_p50_ms"),
    ("added_ttfb_p99_ms", "ttfb_p99_ms"),
    ("added_gap_p50_ms", "gap_p50_ms"),
    ("added_gap_p99_ms", "gap_p99_ms"),
]


def label(scenario: Scenario) -> str:
    """How the table names a scenario."""
    if scenario.kind == "hold":
        return f"{scenario.concurrency} open streams"
    if scenario.kind == "paced":
        return f"stream {PACED_CHUNK_MS:g}ms/chunk c={scenario.concurrency}"
    what = "stream" if scenario.stream else "chat"
    return f"{what} c={scenario.concurrency}"


def select(names: list[str] | None) -> list[Scenario]:
    """Scenarios by name or name prefix (``chat`` picks all three chat ones); None: all."""
    if not names:
        return list(SCENARIOS)
    chosen = [s for s in SCENARIOS if any(s.name.startswith(n) for n in names)]
    unknown = [n for n in names if not any(s.name.startswith(n) for s in SCENARIOS)]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; known: {[s.name for s in SCENARIOS]}")
    return chosen
