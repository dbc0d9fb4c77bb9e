"""Memory a request holds, and CPU time it takes, in the gateway:
``python -m bench.request_cost [--kind KIND ...] [--number N] [--cpu-number N]``.

Each request kind of bench/callcounter.py (``--kind``, default chat json and embeddings
json; the embeddings answer at its full width, 16 vectors of 1,536 floats, not the narrow
one callcount asks for) goes through the gateway in this process (an ASGI call,
bench/inprocess.py) to the fast fake engine in its own, with the shipped
``config.yaml``. tracemalloc gives, per request, above what was allocated before it:

- ``answering``: what the request holds while its answer is written to the client (an
  await: what each of many requests in flight holds at once);
- ``peak``: its largest, which includes the JSON parser's working memory, taken and
  given back inside one synchronous parse (so one request at a time per process holds
  it, however many are in flight);
- ``kept``: what is still allocated after it (caches; nothing should grow).

Each figure is the least over ``--number`` requests: allocation sizes, not times, so
they do not depend on the machine's load. ``cpu``: this process's CPU time per request
(``time.process_time`` over ``--cpu-number`` requests one after another, tracemalloc off;
the engine runs in its own process): a time, so meaningful only on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging.config
import os
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import orjson

from bench.callcounter import KINDS, Kind, _gateway, _logs_to_devnull, _one
from bench.inprocess import Call, fake_engine, run
from bench.table import markdown

ROOT = Path(__file__).resolve().parent.parent


Figures = tuple[int, int, int, float]  # answering, peak, kept, cpu seconds


async def _measured(app: object, kind: Kind, body: bytes) -> Figures:
    call = Call(body, [], kind.path)
    before = tracemalloc.get_traced_memory()[0]
    answering = 0
    send = call.send

    async def sampling_send(message: dict[str, object]) -> None:
        nonlocal answering
        if message["type"] == "http.response.body":
            answering = max(answering, tracemalloc.get_traced_memory()[0] - before)
        await send(message)

    await app(call.scope, call.receive, sampling_send)  # type: ignore[operator]
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status} to {kind.name}")
    after, peak = tracemalloc.get_traced_memory()
    return answering, peak - before, after - before, 0.0


async def held(url: str, kinds: Sequence[Kind], number: int, cpu_number: int) -> dict[str, Figures]:
    """Per kind: (answering, peak, kept) bytes per request, the least over ``number``,
    and the CPU seconds per request over ``cpu_number``."""
    create_app, load_settings, logging_config = _gateway()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    settings = load_settings(
        ROOT / "config.yaml", overrides={("upstream", "url"): url}, environ=environ
    )
    logging.config.dictConfig(logging_config(settings.log.format))
    app = create_app(settings)
    out: dict[str, Figures] = {}
    async with app.router.lifespan_context(app):
        for kind in kinds:
            body = orjson.dumps(kind.body)
            for _ in range(20):  # warm up: connections, caches, first-use imports
                await _one(app, kind, body, None)
            found: list[Figures] = []
            tracemalloc.start()
            try:
                for _ in range(number):
                    await asyncio.sleep(0)
                    tracemalloc.reset_peak()
                    found.append(await _measured(app, kind, body))
            finally:
                tracemalloc.stop()
            cpu = time.process_time()
            for _ in range(cpu_number):
                await _one(app, kind, body, None)
            per_request = (time.process_time() - cpu) / max(1, cpu_number)
            out[kind.name] = (
                min(f[0] for f in found),
                min(f[1] for f in found),
                min(f[2] for f in found),
                per_request,
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__)
    names = [k.name for k in KINDS]
    parser.add_argument(
        "--kind", action="append", choices=names, help="default: chat json, embeddings json"
    )
    parser.add_argument("--number", type=int, default=20, help="requests measured per kind")
    parser.add_argument("--cpu-number", type=int, default=200, help="requests timed per kind")
    args = parser.parse_args(argv)
    chosen = args.kind or ["chat json", "embeddings json"]
    kinds = [dataclasses.replace(k, headers=()) for k in KINDS if k.name in chosen]
    with fake_engine() as url, _logs_to_devnull():
        figures = run(held(url, kinds, args.number, args.cpu_number))
    rows = [["request", "request bytes", "answering", "peak", "kept after", "cpu us"]]
    for kind in kinds:
        answering, peak, kept, cpu = figures[kind.name]
        shown = [len(orjson.dumps(kind.body)), answering, peak, kept, f"{cpu * 1e6:.0f}"]
        rows.append([kind.name, *map(str, shown)])
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
