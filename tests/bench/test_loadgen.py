"""The streaming load generator, against the fake engine on loopback."""

from __future__ import annotations

import math

import pytest

from bench.fake_engine import CHUNKS, start_engine
from bench.loadgen import StreamTiming, build_request, run_streams, summarize


def test_build_request() -> None:
    host, port, request = build_request("http://127.0.0.1:8080/v1/chat/completions", b"{}")
    assert (host, port) == ("127.0.0.1", 8080)
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert request.endswith(b"content-length: 2\r\n\r\n{}")


def test_summary_counts_gaps_and_coalesced_events() -> None:
    timings = [
        StreamTiming(ttfb=0.001, gaps=[0.02, 0.0, 0.02], coalesced=1, events=4, ok=True),
        StreamTiming(ok=False),
    ]
    summary = summarize(timings, 1.0)
    assert (summary["streams"], summary["errors"], summary["events"]) == (1, 1, 4)
    assert summary["ttfb_p50_ms"] == pytest.approx(1.0)
    assert summary["gap_p50_ms"] == pytest.approx(20.0)
    assert summary["coalesced_pct"] == pytest.approx(100 / 3)


def test_summary_of_nothing() -> None:
    summary = summarize([], 1.0)
    assert summary["streams"] == 0
    assert math.isnan(summary["ttfb_p50_ms"])


@pytest.mark.anyio
async def test_streams_against_the_engine() -> None:
    server = await start_engine("127.0.0.1", 0, chunk_delay_ms=0.05)
    host, port = server.sockets[0].getsockname()[:2]
    async with server:
        summary = await run_streams(
            f"http://{host}:{port}/v1/chat/completions", concurrency=2, seconds=0.05
        )
    assert summary["errors"] == 0
    assert summary["streams"] >= 2
    assert summary["events"] == summary["streams"] * CHUNKS
