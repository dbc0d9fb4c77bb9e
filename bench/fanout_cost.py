"""What ``n`` served by fan-out adds over a single request, through the gateway.

``python -m bench.fanout_cost [--rounds N] [--number N] [--n N] [--client NAME]``

The gateway runs in this process, called as an ASGI app with hand-written
``receive``/``send`` (no client HTTP stack to measure), in front of the fast
fake engine (bench/fake_engine.py) in its own process over loopback: latency
and CPU time are then the gateway's own, its upstream client's included. A
single request and the same request with ``n`` run one after another, one
request at a time, interleaved round by round so a noisy machine slows both
alike; JSON, streamed (64 chunks per stream, sent at once, so the gateway
merges whole blocks of events), and paced streams (the same 64 chunks 1 ms
apart, each arriving on its own as from a real engine). The table gives
medians of the rounds: p50 latency and CPU microseconds per client request,
and the ratios fan-out / single. The fake engine answers at once, so the
figures are the gateway's work alone: with a real engine the n requests run
concurrently and the added latency is this plus whatever the engine's batch
takes longer.

Then the per-event cost of the stream merge: what a streamed chunk costs the
single relay (``EventSplitter.feed``, which parses it to check it) and what
fan-out adds (``StreamMerge.rewrite``: a second parse, the index and id
rewritten, a dump).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import orjson

from bench.fake_engine import stream_events
from bench.inprocess import BODY, PACED, Variant, compare_pairs, pair_options
from bench.table import format_number, markdown
from gateway.proxy.events import EventSplitter
from gateway.proxy.merge import StreamMerge


def variants(n: int) -> list[tuple[Variant, Variant]]:
    """Pairs of (single request, the same with ``n``)."""
    stream = {**BODY, "stream": True}
    return [
        (
            Variant("json single", orjson.dumps(BODY)),
            Variant(f"json n={n}", orjson.dumps({**BODY, "n": n})),
        ),
        (
            Variant("stream single", orjson.dumps(stream)),
            Variant(f"stream n={n}", orjson.dumps({**stream, "n": n})),
        ),
        (
            Variant("paced stream single", orjson.dumps(stream), PACED, share=10),
            Variant(f"paced stream n={n}", orjson.dumps({**stream, "n": n}), PACED, share=10),
        ),
    ]


def rewrite_cost(*, number: int, rounds: int) -> tuple[float, float]:
    """Median us per streamed chunk: (checked by the splitter, rewritten by the merge)."""
    event = stream_events()[1]
    check: list[float] = []
    rewrite: list[float] = []
    for _ in range(rounds):
        splitter = EventSplitter()
        start = time.perf_counter()
        for _ in range(number):
            splitter.feed(event)
        check.append((time.perf_counter() - start) / number * 1e6)
        merge = StreamMerge(3, include_usage=False)
        start = time.perf_counter()
        for i in range(number):
            merge.rewrite(i % 3, event)
        rewrite.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(check), statistics.median(rewrite)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout_cost", description=__doc__)
    pair_options(parser)
    parser.add_argument("--n", type=int, default=3, help="the fan-out measured")
    args = parser.parse_args(argv)
    compare_pairs(variants(args.n), args)
    check, rewrite = rewrite_cost(number=20000, rounds=args.rounds)
    print()
    print("per streamed chunk (a 64-chunk stream's typical event)")
    print(
        markdown(
            [
                ["step", "us/event"],
                ["checked (single relay and fan-out)", format_number(check)],
                ["rewritten (fan-out only)", format_number(rewrite)],
            ]
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
