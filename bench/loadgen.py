"""A small streaming load generator that times every SSE event (wrk cannot).

Raw asyncio Protocols on uvloop with httptools parsing: one keep-alive
connection per client, each client posting streaming chat requests back to
back. It records, per stream, the time from writing the request to the first
JSON event (time to first byte) and the gaps between successive JSON events;
two events that arrive in the same read count as coalesced.

Two modes, each printing one JSON object on stdout:

- ``stream``: ``--concurrency`` clients for ``--seconds``, each timing at least
  ``--min-streams`` (streams under way at the end are finished, not cut).
- ``hold``: open ``--streams`` streams at once, print ``open N`` once each has
  its first event (or ``--open-timeout`` passed, or none opened for 2 s), hold
  them until stdin closes, then close them all. The caller measures the
  proxy's memory meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

import httptools

from bench.scenarios import STREAM_BODY
from bench.stats import percentile


@dataclass
class StreamTiming:
    """What one stream looked like from the client."""

    ttfb: float = 0.0
    gaps: list[float] = field(default_factory=list)
    coalesced: int = 0
    events: int = 0
    ok: bool = False


class _Client(asyncio.Protocol):
    """One connection that sends a request when asked and times its answer."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._buffer = b""
        self._sent = 0.0
        self._last = 0.0
        self._now = 0.0
        self._timing = StreamTiming()
        self._done: asyncio.Future[StreamTiming] | None = None
        self._closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._done is not None and not self._done.done():
            self._done.set_result(self._timing)
        if not self._closed.done():
            self._closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._now = time.perf_counter()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self.close()

    def on_status(self, status: bytes) -> None:
        pass

    def on_body(self, body: bytes) -> None:
        self._buffer += body
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return
            event, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            if not event.startswith(b"data: {"):
                continue
            timing = self._timing
            if timing.events == 0:
                timing.ttfb = self._now - self._sent
            else:
                timing.gaps.append(self._now - self._last)
                if self._now == self._last:
                    timing.coalesced += 1
            timing.events += 1
            self._last = self._now

    def on_message_complete(self) -> None:
        self._timing.ok = self._parser.get_status_code() == 200
        if self._done is not None and not self._done.done():
            self._done.set_result(self._timing)

    def start(self, request: bytes) -> asyncio.Future[StreamTiming]:
        """Send ``request``; the future resolves when its answer ends (or the connection)."""
        self._timing = StreamTiming()
        self._buffer = b""
        self._done = asyncio.get_running_loop().create_future()
        if self._transport is None:
            self._done.set_result(self._timing)
            return self._done
        self._sent = time.perf_counter()
        self._transport.write(request)
        return self._done

    def first_event(self) -> bool:
        """Whether the stream under way has had its first JSON event."""
        return self._timing.events > 0

    def close(self) -> None:
        """Close the connection (a client hanging up)."""
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        """Wait until the connection is gone."""
        await self._closed


def build_request(url: str, body: bytes = STREAM_BODY) -> tuple[str, int, bytes]:
    """Host, port and the raw HTTP/1.1 request that POSTs ``body`` to ``url``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = (
        b"POST %s HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
        b"accept: text/event-stream\r\ncontent-length: %d\r\n\r\n"
        % (parts.path.encode() or b"/", host.encode(), port, len(body))
    ) + body
    return host, port, request


async def _connect(host: str, port: int) -> _Client:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(_Client, host, port)
    return client


def summarize(timings: list[StreamTiming], seconds: float) -> dict[str, float | int]:
    """Percentiles in milliseconds over every stream and every gap."""
    ok = [t for t in timings if t.ok]
    ttfbs = [t.ttfb * 1000 for t in ok]
    gaps = [g * 1000 for t in ok for g in t.gaps]
    coalesced = sum(t.coalesced for t in ok)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "streams": len(ok),
        "errors": len(timings) - len(ok),
        "seconds": seconds,
        "events": sum(t.events for t in ok),
        "ttfb_p50_ms": percentile(ttfbs, 50),
        "ttfb_p99_ms": percentile(ttfbs, 99),
        "gap_p50_ms": percentile(gaps, 50),
        "gap_p99_ms": percentile(gaps, 99),
        "gap_mean_ms": sum(gaps) / len(gaps) if gaps else float("nan"),
        "coalesced_pct": 100.0 * coalesced / len(gaps) if gaps else 0.0,
        "loadgen_cpu_s": usage.ru_utime + usage.ru_stime,
    }


async def run_streams(
    url: str, *, concurrency: int, seconds: float, min_streams: int = 1
) -> dict[str, float | int]:
    """``concurrency`` clients posting streams back to back for ``seconds``.

    Each client goes on past ``seconds`` until it has timed ``min_streams``.
    """
    host, port, request = build_request(url)
    timings: list[StreamTiming] = []
    start = time.perf_counter()
    deadline = start + seconds

    async def client_loop() -> None:
        client = await _connect(host, port)
        done = 0
        try:
            while done < min_streams or time.perf_counter() < deadline:
                done += 1
                timing = await client.start(request)
                timings.append(timing)
                if not timing.ok:
                    client.close()
                    await client.wait_closed()
                    client = await _connect(host, port)
        finally:
            client.close()

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return summarize(timings, time.perf_counter() - start)


async def hold_streams(url: str, *, streams: int, open_timeout: float) -> dict[str, float | int]:
    """Open ``streams`` streams, report when open, hold them until stdin closes."""
    host, port, request = build_request(url)
    clients = await asyncio.gather(*(_connect(host, port) for _ in range(streams)))
    for client in clients:
        client.start(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + open_timeout
    opened, progress = 0, loop.time()
    # Stop waiting at the deadline, or once no stream has opened for 2 s (a proxy
    # whose connection pool is full queues the rest until the first ones end).
    while loop.time() < deadline and loop.time() - progress < 2.0:
        now_open = sum(client.first_event() for client in clients)
        if now_open > opened:
            opened, progress = now_open, loop.time()
        if opened == streams:
            break
        await asyncio.sleep(0.05)
    print(f"open {opened}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    for client in clients:
        client.close()
    await asyncio.gather(*(client.wait_closed() for client in clients))
    return {"streams": streams, "opened": opened}


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.loadgen {stream,hold} URL [options]``."""
    parser = argparse.ArgumentParser(description="streaming load generator")
    parser.add_argument("mode", choices=["stream", "hold"])
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--min-streams", type=int, default=1)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--open-timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    if args.mode == "stream":
        work = run_streams(
            args.url,
            concurrency=args.concurrency,
            seconds=args.seconds,
            min_streams=args.min_streams,
        )
    else:
        work = hold_streams(args.url, streams=args.streams, open_timeout=args.open_timeout)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
        result = asyncio.run(work)
    else:
        result = uvloop.run(work)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
