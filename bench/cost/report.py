"""A scenario's results: the medians, the table (with the ratios and differences to each
case's base, or beside another checkout's figures) and the JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.cost.measure import Samples, figure, medians, ratios
from bench.cost.scenario import Case, Scenario
from bench.table import format_number, markdown

Summary = dict[str, dict[str, float]]  # case -> figure -> median


@dataclass
class Result:
    """What one scenario measured in one tree."""

    scenario: Scenario
    cases: list[Case]
    samples: Samples
    rounds: int
    number: int
    options: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> Summary:
        """Every case's (and every sum row's) figures, medians over rounds."""
        found = medians(self.samples, self.scenario.sums)
        return {case: {k: v[0] for k, v in figures.items()} for case, figures in found.items()}

    def rows(self) -> list[str]:
        """The table's row names, in order: the cases, then the sums."""
        names = [case.name for case in self.cases]
        return names + [name for name, parts in self.scenario.sums if set(parts) <= set(names)]

    def heading(self) -> str:
        """The line above the table: what was measured, and how many times."""
        changed = {k: v for k, v in self.options.items() if v != self.scenario.options.get(k)}
        shown = f" ({', '.join(f'{k}={v}' for k, v in changed.items())})" if changed else ""
        return (
            f"{self.scenario.name}: {self.scenario.title}{shown}; medians of {self.rounds} "
            f"round(s) of {self.number} calls"
        )

    def document(self) -> dict[str, Any]:
        """The JSON of the run: options, and each case's medians and per-round values."""
        summary = self.summary()
        bases = {case.name: case.base for case in self.cases}
        return {
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "rounds": self.rounds,
            "number": self.number,
            "options": {k: str(v) for k, v in self.options.items()},
            "cases": {
                name: {
                    "figures": summary[name],
                    "rounds": {k: list(v) for k, v in self.samples.get(name, {}).items()},
                    "base": bases.get(name),
                }
                for name in self.rows()
            },
        }


def _label(scenario: Scenario, key: str) -> str:
    return scenario.labels.get(key) or figure(key).label


def _ratio(result: Result, case: Case, key: str, summary: Summary) -> float:
    base = case.base
    if base is None or base not in summary:
        return math.nan
    if figure(key).kind in ("time", "reported"):
        return ratios(result.samples, case.name, base, key)  # paired round by round
    mine, theirs = summary[case.name].get(key, math.nan), summary[base].get(key, math.nan)
    return mine / theirs if theirs else math.nan


def table(result: Result) -> str:
    """The scenario's table: a row per case, its figures, the ratios and differences to
    its base."""
    scenario, summary = result.scenario, result.summary()
    info = list(dict.fromkeys(k for case in result.cases for k in case.info))
    header = [scenario.labels.get("case", "case"), *info]
    header += [_label(scenario, k) for k in scenario.figures]
    header += [
        scenario.labels.get(f"{k} ratio") or f"{_label(scenario, k)} ratio"
        for k in scenario.compare
    ]
    header += [scenario.labels.get(f"+{k}") or f"+{_label(scenario, k)}" for k in scenario.added]
    by_name = {case.name: case for case in result.cases}
    lines = [header]
    for name in result.rows():
        case = by_name.get(name, Case(name, lambda: None))
        figures = summary.get(name, {})
        line = [name, *(case.info.get(k, "") for k in info)]
        line += [format_number(figures.get(k, math.nan)) for k in scenario.figures]
        line += [
            "" if case.base is None else format_number(_ratio(result, case, k, summary))
            for k in scenario.compare
        ]
        for key in scenario.added:
            base = summary.get(case.base or "", {})
            value = figures.get(key, math.nan) - base.get(key, math.nan)
            line.append("" if case.base is None else format_number(value))
        lines.append(line)
    return markdown(lines)


def beside(result: Result, name: str, other: Summary) -> str:
    """The scenario's table with another checkout's figures (``other``, named ``name``)
    beside this tree's, and the ratio this / other of each."""
    scenario, summary = result.scenario, result.summary()
    header = [scenario.labels.get("case", "case")]
    for key in scenario.figures:
        label = _label(scenario, key)
        header += [f"{label} ({name})", label, "ratio"]
    lines = [header]
    for row in result.rows():
        line = [row]
        for key in scenario.figures:
            old = other.get(row, {}).get(key, math.nan)
            new = summary.get(row, {}).get(key, math.nan)
            ratio = new / old if old and not math.isnan(old) else math.nan
            line += [format_number(old), format_number(new), format_number(ratio)]
        lines.append(line)
    return markdown(lines)
