"""What each part of the gateway costs, one scenario at a time, in this process:
``python -m bench.cost [SCENARIO ...] [--rounds N] [--number N] [--set KEY=VALUE]
[--only CASE,...] [--baseline DIR] [--json FILE]``

Without a scenario it lists them (bench/cost/registry.py); ``all`` runs every one; a
prefix picks several. Each scenario starts what it needs (the gateway in process as an
ASGI app, the fast fake engine in its own process, a Redis of its own), warms up, and
measures its cases in interleaved rounds (bench/cost/measure.py says how each figure is
taken), then prints one table: a row per case, its medians, and the ratio and difference
to the case it is compared with. ``--rounds``/``--number`` override the scenario's own;
``--set`` its options (``--set n=4`` for fanout); ``--only`` keeps the cases whose names
start so.

``--baseline DIR`` (default ``$FT_BENCH_BASELINE``) runs the same scenario again on the
checkout at DIR (its ``gateway`` first on ``sys.path``, in a process of its own, after
this tree's) and prints the two side by side: counts compare exactly; times only on an
idle machine, since the two do not interleave (``FT_BENCH_BASELINE=DIR scripts/bench``
interleaves two gateways under load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.cost import registry
from bench.cost.measure import measure
from bench.cost.report import Result, Summary, beside, table
from bench.cost.scenario import Scenario, context
from bench.inprocess import run
from bench.table import markdown

BASELINE_ENV = "FT_BENCH_BASELINE"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line of ``python -m bench.cost``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenarios", nargs="*", help="names or prefixes, or all (none: the list)")
    parser.add_argument("--rounds", type=int, help="rounds (default: the scenario's)")
    parser.add_argument("--number", type=int, help="calls per case per round (default: its)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--only", help="comma list of case names or prefixes")
    parser.add_argument("--baseline", type=Path, default=os.environ.get(BASELINE_ENV) or None)
    parser.add_argument("--json", help="write the results as JSON to FILE (-: stdout only)")
    # The checkout whose gateway is measured (what --baseline runs in its child).
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for flag in ("rounds", "number"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")
    return args


def _parse(value: str, default: Any) -> Any:
    if isinstance(default, bool):
        if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"not a boolean: {value!r}")
        return value.lower() in ("1", "true", "yes")
    if isinstance(default, int | float | Path):
        return type(default)(value)
    return value


def options_for(scenario: Scenario, settings: Mapping[str, str]) -> dict[str, Any]:
    """The scenario's options: its defaults, with those ``--set`` gives that it has."""
    return {
        name: _parse(settings[name], default) if name in settings else default
        for name, default in scenario.options.items()
    }


def _settings(pairs: list[str], scenarios: list[Scenario]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair}: not KEY=VALUE")
        if not any(key in s.options for s in scenarios):
            known = sorted({k for s in scenarios for k in s.options})
            raise SystemExit(f"--set {key}: no scenario chosen has it (they have {known})")
        settings[key] = value
    return settings


async def run_scenario(
    scenario: Scenario,
    *,
    rounds: int | None = None,
    number: int | None = None,
    options: Mapping[str, Any] | None = None,
    only: Sequence[str] = (),
) -> Result:
    """Start what ``scenario`` needs, measure its cases (those whose names start with one
    of ``only``, if any) and stop it all."""
    chosen = dict(scenario.options) | dict(options or {})
    rounds = rounds or scenario.rounds
    number = number or scenario.number
    with context(chosen) as ctx:
        ctx.only, ctx.number = tuple(only), number
        async with scenario.setup(ctx) as cases:
            if only:
                cases = [c for c in cases if any(c.name.startswith(o) for o in only)]
            samples = await measure(scenario, cases, rounds=rounds, number=number)
    return Result(scenario, cases, samples, rounds, number, chosen)


def report(name: str, **kwargs: Any) -> str:
    """The table of scenario ``name`` run now (``run_scenario``'s keywords), with its
    heading: for a bench that prints a cost beside its own figures (bench/routing.py)."""
    result = run(run_scenario(registry.load(name), **kwargs))
    return f"{result.heading()}\n{table(result)}"


def _baseline(name: str, tree: Path, args: argparse.Namespace) -> Summary:
    """Scenario ``name`` run on the checkout at ``tree``, in a process of its own."""
    argv = [sys.executable, "-m", "bench.cost", name, "--tree", str(tree), "--json", "-"]
    for flag in ("rounds", "number", "only"):
        if getattr(args, flag) is not None:
            argv += [f"--{flag}", str(getattr(args, flag))]
    for pair in args.set:
        argv += ["--set", pair]
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} on {tree} failed:\n{done.stderr[-3000:]}")
    document = json.loads(done.stdout)[0]
    return {case: found["figures"] for case, found in document["cases"].items()}


def _use_tree(tree: Path) -> None:
    """Put the checkout at ``tree`` first on sys.path for ``gateway`` (bench stays
    this one's: it is imported already)."""
    sys.path.insert(0, str(tree.resolve()))
    for module in [m for m in sys.modules if m == "gateway" or m.startswith("gateway.")]:
        del sys.modules[module]


def main(argv: Sequence[str] | None = None) -> int:
    """List the scenarios, or run those named and print their tables."""
    args = parse_args(argv)
    if args.tree is not None:
        _use_tree(args.tree)
    if not args.scenarios:
        rows = [["scenario", "what it measures"]]
        rows += [[e.name, e.summary] for e in registry.ENTRIES]
        print(markdown(rows, left=2))
        print("\npython -m bench.cost NAME [--rounds N] [--number N] [--set KEY=VALUE]")
        return 0
    try:
        scenarios = [registry.load(name) for name in registry.select(args.scenarios)]
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    settings = _settings(args.set, scenarios)
    only = args.only.split(",") if args.only else ()
    documents = []
    for scenario in scenarios:
        options = options_for(scenario, settings)
        result = run(
            run_scenario(
                scenario, rounds=args.rounds, number=args.number, options=options, only=only
            )
        )
        documents.append(result.document())
        if args.json == "-":
            continue
        print(result.heading())
        if args.baseline is not None and args.tree is None:
            other = _baseline(scenario.name, args.baseline, args)
            print(beside(result, str(args.baseline), other))
        else:
            print(table(result))
        print()
    text = json.dumps(documents, indent=1)
    if args.json == "-":
        print(text)
    elif args.json:
        Path(args.json).write_text(text + "\n")
    return 0
