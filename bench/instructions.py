"""Machine instructions per request, this tree beside another: a CPU figure a loaded machine
does not move. ``python -m bench.instructions [--baseline DIR] [--kind KIND ...] [--number N]
[--served] [--profile] [--top N]``

bench/callcount.py counts the gateway's own Python work; this counts what the CPU
executes for it, C included (the interpreter, orjson, uvloop, httptools, the
allocator): each tree's request loop runs under valgrind's callgrind (Debian's
``valgrind``), in process as callcount does (bench/inprocess.py, the shipped
``config.yaml``, the fast fake engine in its own process), and callgrind writes its
counts at ``os.getppid()`` calls placed just before and just after ``--number``
requests (``--dump-before``), so the figure is the loop's alone: no start-up, no
import, no warm-up. ``PYTHONHASHSEED`` is fixed. What is left to vary is what the
loop itself does differently from one run to the next (a timer that fires, a
collection of the garbage collector): a few tenths of a percent.

Instructions are not time (a cache miss costs more than an add), but on this
interpreter they follow CPU time closely, and two trees compare the same on an idle
machine and on a busy one. Each kind runs both trees at once (two processes).

``--served`` counts ``ft-gateway serve`` itself instead (bench/served.py): the HTTP
server's protocol and ASGI layer included, the requests sent over a socket.
``--profile`` adds where the instructions go: each library's share (the interpreter,
orjson, uvloop, httptools, libc: bench/callgrind.py) and the ``--top`` functions by
their own instructions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.callcounter import KINDS
from bench.callgrind import Measured, by_library, dump_total, library
from bench.inprocess import fake_engine
from bench.served import measure_served
from bench.table import format_number, markdown

ROOT = Path(__file__).resolve().parent.parent
BASELINE_ENV = "FT_BENCH_BASELINE"

# The measured loop, run in the tree's own gateway (as callcounter does: the
# checkout first on sys.path, bench/ from this one).
_LOOP = r"""
import asyncio, logging.config, os, sys
from pathlib import Path
bench, tree, kind_name, number, url = sys.argv[1:6]
sys.path.insert(0, bench)
import orjson
from bench.callcounter import KINDS, _gateway, _logs_to_devnull, _one
from bench.inprocess import run
for name in [m for m in sys.modules if m == "gateway" or m.startswith("gateway.")]:
    del sys.modules[name]
sys.path.insert(0, tree)
kind = next(k for k in KINDS if k.name == kind_name)

async def main():
    create_app, load_settings, logging_config = _gateway()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    settings = load_settings(
        Path(tree) / "config.yaml", overrides={("upstream", "url"): url}, environ=environ
    )
    logging.config.dictConfig(logging_config(settings.log.format))
    app = create_app(settings)
    body = orjson.dumps(kind.body)
    async with app.router.lifespan_context(app):
        if not await _one(app, kind, body, None):
            return False  # this checkout has no such route
        for _ in range(50):
            await _one(app, kind, body, None)
        os.getppid()
        for _ in range(int(number)):
            await _one(app, kind, body, None)
        os.getppid()
    return True

with _logs_to_devnull():
    served = run(main())
if not served:
    sys.exit(3)
"""


def loop_dump(dumps: Sequence[Path]) -> Path:
    """The dump of the measured loop: the one callgrind wrote at the second
    ``os.getppid()`` (its files are ``out.1``, ``out.2``, ... in order)."""
    numbered = sorted((p for p in dumps if p.suffix[1:].isdigit()), key=lambda p: int(p.suffix[1:]))
    if len(numbered) < 2:
        raise SystemExit("callgrind wrote no dump for the measured loop")
    return numbered[1]


def loop_total(dumps: Sequence[Path]) -> int:
    """The instructions of the measured loop (``loop_dump``'s total)."""
    return dump_total(loop_dump(dumps))


NOT_SERVED = 3  # the exit status of a loop whose checkout has no route for the kind


def measure(
    tree: Path, kind: str, number: int, url: str, *, profile: bool = False
) -> Measured | None:
    """Instructions per request of ``kind`` through the checkout at ``tree``, and with
    ``profile`` each function's (None: it has no such route, an older one)."""
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "callgrind.out"
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=os_getppid*",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            _LOOP,
            str(ROOT),
            str(tree),
            kind,
            str(number),
            url,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if done.returncode == NOT_SERVED:
            return None
        if done.returncode != 0:
            raise SystemExit(f"measuring {tree} ({kind}) failed:\n{done.stderr[-3000:]}")
        dump = loop_dump(list(Path(work).glob("callgrind.out.*")))
        return Measured.of(dump, number, profile=profile)


def profile_tables(measured: Measured, *, top: int) -> str:
    """Where one kind's instructions per request go: by library, then by function."""
    costs = measured.costs or {}
    total = sum(costs.values()) or 1.0
    rows = [["library", "instructions/request", "share"]]
    for name, cost in by_library(costs).items():
        rows.append([name, f"{cost:,.0f}", f"{cost / total:.1%}"])
    functions = [["function (own instructions)", "library", "instructions/request", "share"]]
    for (obj, function), own in sorted(costs.items(), key=lambda item: -item[1])[:top]:
        functions.append([function, library(obj), f"{own:,.0f}", f"{own / total:.1%}"])
    return markdown(rows) + "\n\n" + markdown(functions, left=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each kind in each tree and print the table (and the profiles)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = [k.name for k in KINDS]
    parser.add_argument("--kind", action="append", choices=names, help="default: every kind")
    parser.add_argument("--number", type=int, default=100, help="requests in the measured loop")
    parser.add_argument("--baseline", type=Path, default=os.environ.get(BASELINE_ENV) or None)
    parser.add_argument("--served", action="store_true", help="count ft-gateway serve itself")
    parser.add_argument("--profile", action="store_true", help="by library and by function")
    parser.add_argument("--top", type=int, default=25, help="--profile: functions shown")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    kinds = args.kind or names
    trees = [("this tree", ROOT)] + ([(str(args.baseline), args.baseline)] if args.baseline else [])
    count = measure_served if args.served else measure
    figures: dict[tuple[str, str], Measured | None] = {}
    with fake_engine() as url, ThreadPoolExecutor(len(trees)) as pool:
        for kind in kinds:
            jobs = {
                name: pool.submit(count, tree, kind, args.number, url, profile=args.profile)
                for name, tree in trees
            }
            for name, job in jobs.items():
                figures[(name, kind)] = job.result()
    header = ["request", *(name for name, _ in trees)]
    if len(trees) == 2:
        header.append("ratio")
    rows = [header]
    for kind in kinds:
        values = [figures[(name, kind)] for name, _ in trees]
        counts = [None if v is None else v.per_request for v in values]
        row = [kind, *("-" if v is None else f"{v:,}" for v in counts)]
        if len(counts) == 2:
            new, old = counts
            row.append(format_number(new / old) if new is not None and old else "-")
        rows.append(row)
    where = "ft-gateway serve, its server included" if args.served else "the app in process"
    print(f"instructions per request (callgrind, {where}), this tree beside the baseline:")
    print(markdown(rows))
    if args.profile:
        for (name, kind), measured in figures.items():
            if measured is not None:
                print(f"\n{name}, {kind}: where the instructions go")
                print(profile_tables(measured, top=args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
