"""What the default response store (SQLite) adds to a Responses request: the write on
each answer, and the read of a continuation (``previous_response_id``), against
``store.backend: none``.

``python -m bench.store_cost [--rounds N] [--number N]``

The gateway runs in this process (an ASGI app called with hand-written
``receive``/``send``, as bench/responses_cost.py does) in front of the fast fake
engine in its own process. Three kinds of request, one at a time, interleaved
round by round: a first turn with no store, a first turn kept in SQLite (one
write), and a second turn continuing a stored response (one read, one write).
Then the store's own calls without the gateway around them: put and get on the
same file, per call. The table gives medians of the rounds; "added" is the CPU
time over the no-store request. The file is a temporary one, on this machine's
disk, opened as the gateway opens it (WAL mode, synchronous NORMAL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.inprocess import BODY, Call, fake_engine, run, settings_for
from bench.table import format_number, markdown

ROUTE = "/v1/responses"
FIRST: dict[str, Any] = {
    "model": BODY["model"],
    "input": BODY["messages"][0]["content"],
    "max_output_tokens": BODY["max_tokens"],
}
HEADER = ["request", "p50 latency us", "CPU us/request", "added CPU us"]


async def _post(app: Any, body: bytes) -> tuple[float, dict[str, Any]]:
    call = Call(body, [(b"authorization", b"Bearer sk-bench")], path=ROUTE)
    chunks: list[bytes] = []
    send = call.send

    async def keep(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
        await send(message)

    start = time.perf_counter()
    await app(call.scope, call.receive, keep)
    elapsed = time.perf_counter() - start
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status}: {b''.join(chunks)[:200]!r}")
    return elapsed, orjson.loads(b"".join(chunks))


async def measure(url: str, folder: Path, *, rounds: int, number: int) -> list[list[str]]:
    from gateway.app.factory import create_app

    bare = create_app(settings_for(url))
    kept = create_app(settings_for(url, store={"backend": "sqlite", "path": folder / "r.db"}))
    first = orjson.dumps(FIRST)
    async with bare.router.lifespan_context(bare), kept.router.lifespan_context(kept):
        for app in (bare, kept):
            for _ in range(20):
                await _post(app, first)
        _, earlier = await _post(kept, first)
        second = orjson.dumps(FIRST | {"previous_response_id": earlier["id"], "input": "And?"})
        kinds = [("first turn, store none", bare, first)]
        kinds += [("first turn, SQLite (write)", kept, first)]
        kinds += [("second turn, SQLite (read + write)", kept, second)]
        latency: dict[str, list[float]] = {name: [] for name, _, _ in kinds}
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in kinds}
        for _ in range(rounds):
            for name, app, body in kinds:
                times = []
                cpu_start = time.process_time()
                for _ in range(number):
                    times.append((await _post(app, body))[0])
                cpu[name].append((time.process_time() - cpu_start) / number * 1e6)
                latency[name].append(statistics.median(times) * 1e6)
    rows = []
    base = statistics.median(cpu[kinds[0][0]])
    for name, _, _ in kinds:
        p50, used = statistics.median(latency[name]), statistics.median(cpu[name])
        added = "" if name == kinds[0][0] else format_number(used - base)
        rows.append([name, format_number(p50), format_number(used), added])
    return rows


async def store_calls(folder: Path, *, number: int) -> list[list[str]]:
    """The store's own put and get, per call (wall time: they run on a thread)."""
    from gateway.responses.shape import message_item, response_object
    from gateway.responses.sqlitestore import SqliteStore
    from gateway.responses.store import StoredResponse

    store = SqliteStore(folder / "calls.db", 86400)
    text = "Cats are small carnivorous mammals. " * 10
    ids = [f"resp_{i:048x}" for i in range(number)]
    try:
        start = time.perf_counter()
        for response_id in ids:
            output = [message_item("msg_1", text, status="completed")]
            answer = response_object(
                response_id, FIRST, created_at=0, status="completed", output=output
            )
            input_item = {"type": "message", "role": "user", "content": FIRST["input"]}
            await store.put(StoredResponse("token:x", answer, [input_item], []))
        put = (time.perf_counter() - start) / number * 1e6
        start = time.perf_counter()
        for response_id in ids:
            await store.get(response_id, "token:x")
        get = (time.perf_counter() - start) / number * 1e6
    finally:
        await store.aclose()
    return [["store.put (one answer)", format_number(put), "", ""]] + [
        ["store.get (one continuation)", format_number(get), "", ""]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=200, help="requests per kind per round")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, fake_engine() as url:
        folder = Path(tmp)
        rows = run(measure(url, folder, rounds=args.rounds, number=args.number))
        rows += asyncio.run(store_calls(folder, number=args.number))
    print(
        f"the Responses route with and without the SQLite store, one request at a time: "
        f"medians of {args.rounds} rounds of {args.number} requests each; then the store's "
        f"own calls (wall time per call, {args.number} each)"
    )
    print(markdown([HEADER, *rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
