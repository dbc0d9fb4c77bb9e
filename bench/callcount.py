"""Python work per request on the default path: a cost guard that does not depend on timing.

``python -m bench.callcount [--write | --check] [--baseline DIR] [--profile KIND]``

Each request kind (chat JSON, chat stream, Responses JSON, Responses stream, Messages
JSON, Messages stream (Anthropic's API, translated); a 1 KB four-message conversation)
goes through the gateway in one process (an ASGI call with hand-written
``receive``/``send``, bench/inprocess.py) to the fast fake engine in its own process,
with the shipped ``config.yaml``. Hooks count, per request:

- ``own``: calls of functions defined in ``gateway/`` (a coroutine or generator resumed
  counts as a call, as it costs one);
- ``python``: all Python function calls; ``builtin``: calls of built-in functions;
- ``opcodes``: bytecodes executed, which also sees the work inside loops.

The engine sends each answer in one write, under one loopback segment (the embeddings
kind asks for 64-wide vectors: about 20 KB), so the counts do not depend on how the kernel
splits it, and each figure is the least over ``--number`` requests, so a timer that fires
during one request does not move it: the same tree gives the same figures every run.

- with no flag: this tree's counts beside those recorded in bench/callcount.json;
- ``--write``: record this tree's counts there, after a change that is meant to cost more
  (the diff then shows what it costs) or one that saved work (to bank the saving);
- ``--check``: exit 1 when a count is above the recorded one (tests/bench runs this).
  ``own`` calls are compared always; the other figures only where the Python and library
  versions are those the figures were recorded with, since a new starlette or pydantic
  moves them without any change here;
- ``--baseline DIR`` (default ``$FT_BENCH_BASELINE``): another checkout's counts, with its
  own ``config.yaml``, side by side;
- ``--profile KIND``: which functions make the count (calls and bytecodes per request),
  and a cProfile on a CPU-time clock.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.callcounter import FIGURE_NAMES, KINDS
from bench.table import format_number, markdown

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "bench" / "callcount.json"
BASELINE_ENV = "FT_BENCH_BASELINE"
UPDATE = "python -m bench.callcount --write"


def measure(tree: Path, *, number: int, profile: str | None = None) -> dict[str, Any]:
    """The counts of the checkout at ``tree``, taken in a fresh interpreter."""
    argv = [sys.executable, "-m", "bench.callcounter", str(tree), "--number", str(number)]
    if profile is not None:
        argv += ["--profile", profile]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"counting {tree} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def compare(recorded: dict[str, Any], current: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(each count above its recorded figure, each below it), as sentences; the figures
    other than ``own`` only where the environment is the recorded one."""
    same = recorded["environment"] == current["environment"]
    grown, shrunk = [], []
    for kind, figures in recorded["counts"].items():
        now = current["counts"].get(kind)
        if now is None:
            grown.append(f"{kind}: not counted")
            continue
        for figure in FIGURE_NAMES if same else ("own",):
            change = now[figure] - figures[figure]
            sentence = (
                f"{kind}: {now[figure]} {figure} per request, {figures[figure]} recorded "
                f"({change:+d})"
            )
            if change > 0:
                grown.append(sentence)
            elif change < 0:
                shrunk.append(sentence)
    return grown, shrunk


def table(columns: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The counts of each column (a name and a measure() result); with two, their ratio."""
    header = ["request", "figure", *(name for name, _ in columns)]
    if len(columns) == 2:
        header.append("ratio")
    rows = [header]
    for kind in KINDS:
        for figure in FIGURE_NAMES:
            values = [result["counts"].get(kind.name, {}).get(figure) for _, result in columns]
            row = [kind.name if figure == FIGURE_NAMES[0] else "", figure]
            row += ["-" if v is None else str(v) for v in values]
            if len(columns) == 2:
                old, new = values
                row.append(format_number(new / old) if old and new is not None else "-")
            rows.append(row)
    return markdown(rows)


def check(current: dict[str, Any]) -> int:
    """Exit status of ``--check``: 1 if a count grew past the recorded figures."""
    if not FIGURES.exists():
        print(f"{FIGURES} is missing: {UPDATE}", file=sys.stderr)
        return 1
    recorded = json.loads(FIGURES.read_text())
    grown, shrunk = compare(recorded, current)
    if recorded["environment"] != current["environment"]:
        print(
            "not the recorded Python and library versions: only the own calls are "
            f"compared (recorded {recorded['environment']}, now {current['environment']})",
            file=sys.stderr,
        )
    for sentence in grown:
        print(f"more work: {sentence}", file=sys.stderr)
    for sentence in shrunk:
        print(f"less work: {sentence}", file=sys.stderr)
    if grown:
        print(f"a change added work per request; if it is meant to: {UPDATE}", file=sys.stderr)
        return 1
    if shrunk:
        print(f"less work than recorded: bank it with {UPDATE}", file=sys.stderr)
    return 0


def profile(kind: str, trees: Sequence[tuple[str, Path]], *, number: int, top: int) -> None:
    """Print, for each tree, the functions that make ``kind``'s counts."""
    for name, tree in trees:
        result = measure(tree, number=number, profile=kind)["counts"][kind]
        least = ", ".join(f"{figure} {result[figure]}" for figure in FIGURE_NAMES)
        print(f"\n{name} ({tree}), {kind}: per request (least) {least}\n")
        for title, key in (("calls", "functions"), ("bytecodes", "function_opcodes")):
            rows = [[f"{title}/request", "function"]]
            rows += [[format_number(v), k] for k, v in list(result[key].items())[:top]]
            print(markdown(rows) + "\n")
        rows = [["calls/request", "own us/request", "cumulative us/request", "function"]]
        for where, calls, own, cumulative in result["cprofile"][:top]:
            rows.append([format_number(x) for x in (calls, own, cumulative)] + [where])
        print("cProfile (CPU time, the profiler's own cost included), by own time:")
        print(markdown(rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.callcount",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"record the counts in {FIGURES}")
    action.add_argument("--check", action="store_true", help="exit 1 if a count grew")
    action.add_argument("--profile", choices=[k.name for k in KINDS], help="by function")
    parser.add_argument("--baseline", type=Path, default=os.environ.get(BASELINE_ENV) or None)
    parser.add_argument("--number", type=int, default=20, help="requests counted per kind")
    parser.add_argument("--top", type=int, default=40, help="--profile: functions shown")
    args = parser.parse_args(argv)
    if args.profile is not None:
        trees = [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
        profile(args.profile, trees, number=args.number, top=args.top)
        return 0
    current = measure(ROOT, number=args.number)
    columns = [("this tree", current)]
    if args.write:
        FIGURES.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
        print(f"wrote {FIGURES.relative_to(ROOT)}")
    elif FIGURES.exists():
        columns.insert(0, ("recorded", json.loads(FIGURES.read_text())))
    if args.baseline is not None:
        columns.insert(0, (f"{args.baseline}", measure(args.baseline, number=args.number)))
    print(table(columns))
    return check(current) if args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
