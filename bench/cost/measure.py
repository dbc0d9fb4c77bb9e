"""Measuring a scenario's cases: the figures, and how each kind is taken.

- **time** (``p50_us``, ``wall_us``, ``cpu_us``, ``tally``): every case runs
  ``number // share`` calls a round, the cases one after another in each round, so a
  noisy machine slows all alike; each figure is a median over rounds. ``p50_us`` times
  each call (the median latency of one call); ``wall_us`` and ``cpu_us`` divide a
  round's wall-clock and CPU time (``time.process_time``: this process's, never a
  server's in its own process) by its calls.
- **count** (``calls``, ``builtin``, ``opcodes``): the Python calls, built-in calls and
  bytecodes one call runs (``sys.setprofile``/``sys.settrace``, bench/callcounter.py's
  counter), less the case's own callable: the least over up to 20 calls, the same on
  any machine under any load.
- **memory** (``answering``, ``peak``, ``kept``): tracemalloc around one call: its peak
  and what it kept above what was allocated before it; ``answering`` is what a request
  held while its answer was being written (its call reports the traced memory then).
  The least over up to 20 calls: sizes, not times.
- any other key is **reported** by the call itself (it returns a mapping of figures:
  a run that measures itself, as the batch scenario's do); median over rounds.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bench.callcounter import Counter
from bench.cost.scenario import Case, Scenario
from bench.stats import median

Kind = Literal["time", "count", "memory", "reported"]
Samples = dict[str, dict[str, list[float]]]  # case -> figure -> one value per round


@dataclass(frozen=True)
class Figure:
    """A figure a case can be measured by: its key, its column's label, how it is taken."""

    key: str
    label: str
    kind: Kind


FIGURES = {
    f.key: f
    for f in (
        Figure("p50_us", "p50 latency us", "time"),
        Figure("wall_us", "us per call", "time"),
        Figure("cpu_us", "CPU us per call", "time"),
        Figure("tally", "per call", "time"),
        Figure("calls", "Python calls", "count"),
        Figure("builtin", "built-in calls", "count"),
        Figure("opcodes", "bytecodes", "count"),
        Figure("answering", "answering bytes", "memory"),
        Figure("peak", "peak bytes", "memory"),
        Figure("kept", "kept bytes", "memory"),
    )
}
# The least of this many calls, for counts and memory.
LEAST_OF = 20


def figure(key: str) -> Figure:
    """The figure of ``key``; a key the table does not know is one the call reports."""
    return FIGURES.get(key) or Figure(key, key, "reported")


async def _invoke(call: Callable[[], Any]) -> Any:
    result = call()
    if inspect.isawaitable(result):
        result = await result
    return result


async def _count(call: Callable[[], Any], calls: int, *, asynchronous: bool) -> dict[str, float]:
    """The least counts of one call over ``calls`` calls. A coroutine counts as it runs:
    its steps, and whatever the loop runs meanwhile (as bench/callcount.py counts a
    request)."""
    least: dict[str, float] = {}
    own = 1 if inspect.isfunction(call) or inspect.ismethod(call) else 0
    for _ in range(calls):
        counter = Counter("")
        tracer = sys.gettrace()
        sys.settrace(counter.trace)
        sys.setprofile(counter.profile)
        try:
            result = call()
            if asynchronous:
                await result
        finally:
            sys.setprofile(None)  # counted: one built-in call, taken off below
            sys.settrace(tracer)
        found = {
            "calls": float(counter.python - own),
            "builtin": float(counter.builtin - 1),
            "opcodes": float(counter.opcodes),
        }
        least = {k: min(v, least.get(k, v)) for k, v in found.items()}
    return least


async def _memory(call: Callable[[], Any], calls: int) -> dict[str, float]:
    """The least memory figures of one call over ``calls`` calls."""
    least: dict[str, float] = {}
    tracemalloc.start()
    try:
        for _ in range(calls):
            await asyncio.sleep(0)  # what earlier calls left to the loop runs first
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            result = await _invoke(call)
            after, peak = tracemalloc.get_traced_memory()
            found = {"peak": float(peak - before), "kept": float(after - before)}
            if isinstance(result, Mapping) and "answering" in result:
                found["answering"] = float(result["answering"] - before)
            least = {k: min(v, least.get(k, v)) for k, v in found.items()}
    finally:
        tracemalloc.stop()
    return least


async def _timed(
    case: Case, *, calls: int, asynchronous: bool, latency: bool, reported: tuple[str, ...]
) -> dict[str, float]:
    """One round of ``calls`` calls of ``case``: its time figures."""
    call = case.call
    tally = case.tally() if case.tally is not None else None
    latencies: list[float] = []
    result: Any = None
    wall, cpu = time.perf_counter(), time.process_time()
    if latency:
        for _ in range(calls):
            start = time.perf_counter()
            result = (await call()) if asynchronous else call()
            latencies.append(time.perf_counter() - start)
    elif asynchronous:
        for _ in range(calls):
            result = await call()
    else:
        for _ in range(calls):
            result = call()
    if case.finish is not None:
        await _invoke(case.finish)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = {"wall_us": wall / calls * 1e6, "cpu_us": cpu / calls * 1e6}
    if latency:
        out["p50_us"] = median(latencies) * 1e6
    if tally is not None and case.tally is not None:
        out["tally"] = (case.tally() - tally) / calls
    if isinstance(result, Mapping):
        out |= {k: float(result[k]) for k in reported if k in result}
    return out


async def measure(scenario: Scenario, cases: list[Case], *, rounds: int, number: int) -> Samples:
    """Every figure of ``scenario`` for each case: one value per round (one in all for
    counts and memory)."""
    kinds = {figure(key).kind for key in scenario.figures}
    reported = tuple(k for k in scenario.figures if figure(k).kind == "reported")
    samples: Samples = {case.name: defaultdict(list) for case in cases}
    asynchronous = {}
    for case in cases:
        if scenario.warmup == 0:  # (a whole run per call: a coroutine function, or not)
            asynchronous[case.name] = inspect.iscoroutinefunction(case.call)
            continue
        # Warm up; the first call says whether the case is a coroutine.
        asynchronous[case.name] = inspect.isawaitable(first := case.call())
        if asynchronous[case.name]:
            await first
        for _ in range(max(0, scenario.warmup // case.share - 1)):
            await _invoke(case.call)
    for case in cases:
        calls = min(LEAST_OF, max(1, number // case.share))
        if "count" in kinds:
            counted = await _count(case.call, calls, asynchronous=asynchronous[case.name])
            for key, value in counted.items():
                samples[case.name][key].append(value)
        if "memory" in kinds:
            for key, value in (await _memory(case.call, calls)).items():
                samples[case.name][key].append(value)
    if "time" in kinds or reported:
        for _ in range(rounds):
            for case in cases:
                figures = await _timed(
                    case,
                    calls=max(1, number // case.share),
                    asynchronous=asynchronous[case.name],
                    latency="p50_us" in scenario.figures,
                    reported=reported,
                )
                for key, value in figures.items():
                    samples[case.name][key].append(value)
    return samples


def medians(samples: Samples, sums: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Samples:
    """The median of each figure (as a list of one), and the rows that add others."""
    out: Samples = {
        case: {key: [median(values)] for key, values in figures.items()}
        for case, figures in samples.items()
    }
    for name, parts in sums:
        if all(part in out for part in parts):
            keys = set.intersection(*(set(out[part]) for part in parts))
            out[name] = {k: [sum(out[part][k][0] for part in parts)] for k in sorted(keys)}
    return out


def ratios(samples: Samples, case: str, base: str, key: str) -> float:
    """The median of ``case``'s per-round ratios to ``base`` in figure ``key``."""
    mine, theirs = samples.get(case, {}).get(key, []), samples.get(base, {}).get(key, [])
    paired = [a / b for a, b in zip(mine, theirs, strict=False) if b]
    return median(paired) if paired else float("nan")
