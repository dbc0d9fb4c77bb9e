"""What the duplicate-key check costs per MB of body, beside the parse it follows.

``python -m bench.duplicate_cost [--mb N] [--rounds N] [--baseline DIR]``

Bodies of about ``--mb`` MB made of small objects, chat messages or the densest
``{"a":0}`` (the worst case for a check that does work per object): plain (the
colon count clears it), one duplicate key at the end, one ``\\u003a`` escape (no
duplicate). For each, the CPU milliseconds per MB of ``orjson.loads`` (the parse
every request pays) and of the check (``gateway/jsonbody/duplicatekeys.py``) in this
tree and, with ``--baseline``, in another checkout's module (loaded from its file):
the least of ``--rounds`` runs, in process time, so another process on the machine
does not add to it.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from gateway.errors import InvalidRequest
from gateway.jsonbody import duplicatekeys

BASELINE_ENV = "FT_BENCH_BASELINE"
# A chat message, and the densest object a hostile client would send.
SHAPES = {"messages": b'{"role":"user","content":"x"}', "{a:0}": b'{"a":0}'}
TAILS = {"plain": b"", "one duplicate": b',"n":1,"n":2', "one \\u003a escape": b',"s":"\\u003a"'}


def body(megabytes: float, tail: bytes, shape: bytes = SHAPES["messages"]) -> bytes:
    """A chat-like body of about ``megabytes`` MB of objects ``shape``, ending in ``tail``."""
    count = max(1, int(megabytes * 1e6 / (len(shape) + 1)))
    return b'{"model":"m","messages":[' + b",".join([shape] * count) + b"]" + tail + b"}"


def _module(tree: Path) -> Any:
    # The module moved from proxy/ to jsonbody/ (the external processor shares it).
    path = next(
        (
            p
            for p in (tree / "gateway" / d / "duplicatekeys.py" for d in ("jsonbody", "proxy"))
            if p.exists()
        ),
        None,
    )
    spec = importlib.util.spec_from_file_location("baseline_duplicatekeys", path) if path else None
    if spec is None or spec.loader is None:
        raise SystemExit(f"no gateway/jsonbody/ or gateway/proxy/duplicatekeys.py in {tree}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_ms(work: Callable[[], object], rounds: int) -> float:
    """The least CPU milliseconds of ``rounds`` runs of ``work``."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best * 1000


def _checker(module: Any, raw: bytes) -> Callable[[], None]:
    parsed = orjson.loads(raw)

    def check() -> None:
        try:
            module.check_duplicate_keys(raw, parsed)
        except InvalidRequest:
            pass

    return check


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=os.environ.get(BASELINE_ENV))
    args = parser.parse_args(argv)
    baseline = _module(Path(args.baseline)) if args.baseline else None
    head = "| objects | body | MB | parse ms/MB | check ms/MB |"
    print(head + (" baseline check ms/MB |" if baseline else ""))
    print("|---|---|---|---|---|" + ("---|" if baseline else ""))
    for shape_name, shape in SHAPES.items():
        for name, tail in TAILS.items():
            raw = body(args.mb, tail, shape)
            size = len(raw) / 1e6
            parse = cpu_ms(functools.partial(orjson.loads, raw), args.rounds) / size
            row = [shape_name, name, f"{size:.1f}", f"{parse:.1f}"]
            row.append(f"{cpu_ms(_checker(duplicatekeys, raw), args.rounds) / size:.1f}")
            if baseline is not None:
                row.append(f"{cpu_ms(_checker(baseline, raw), args.rounds) / size:.1f}")
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
