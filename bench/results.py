"""From one record per (round, scenario, contender) to the table's medians and ratios.

Differences from direct ("added" figures) and ratios to a reference contender
are computed within each round, where the runs were seconds apart, and only
then reduced to their median over rounds: on a noisy machine that pairing
removes most of the drift between rounds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from bench.scenarios import ADDED, METRICS, Scenario, label
from bench.stats import median

Record = dict[str, float | int | str]

# The contenders others are divided by, in the table's column order: nginx for every
# contender; the Rust routers and the naive proxy for the gateway's contenders and nginx.
REFERENCES = ("nginx", "vllm-router", "smg", "naive")


def ratio_pairs(contenders: list[str]) -> list[tuple[str, str]]:
    """The (contender, reference) ratios a run's table gives."""
    pairs = []
    for reference in REFERENCES:
        if reference not in contenders:
            continue
        for contender in contenders:
            if contender == reference:
                continue
            if reference == "nginx" or contender == "nginx" or contender.startswith("gateway"):
                pairs.append((contender, reference))
    return pairs


@dataclass
class Row:
    """One line of the table: a figure of a scenario for every contender, and ratios."""

    scenario: str
    metric: str
    values: dict[str, float]
    ratios: dict[tuple[str, str], float] = field(default_factory=dict)


def _number(record: Record, key: str) -> float:
    value = record.get(key, math.nan)
    return float(value) if isinstance(value, int | float) else math.nan


def add_differences(records: list[Record]) -> None:
    """Give every record its "added" figures: its value minus direct's in the same round."""
    direct = {(r["round"], r["scenario"]): r for r in records if r["contender"] == "direct"}
    for record in records:
        base = direct.get((record["round"], record["scenario"]))
        for added, key in ADDED:
            if key not in record:
                continue
            value = _number(record, key) - _number(base, key) if base else math.nan
            record[added] = value


def _ratio(value: float, reference: float) -> float:
    if math.isnan(value) or math.isnan(reference) or reference == 0:
        return math.nan
    return value / reference


def summarize(records: list[Record], scenarios: list[Scenario], contenders: list[str]) -> list[Row]:
    """Median over rounds of every figure, and of its per-round ratio to each reference."""
    by_key: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in records:
        by_key[(str(record["scenario"]), str(record["contender"]))].append(record)
    pairs = ratio_pairs(contenders)
    rows = []
    for scenario in scenarios:
        for metric in METRICS[scenario.kind]:
            values: dict[str, float] = {}
            ratios: dict[tuple[str, str], float] = {}
            for contender in contenders:
                runs = by_key.get((scenario.name, contender), [])
                values[contender] = median([_number(r, metric.key) for r in runs])
            for contender, reference in pairs:
                runs = by_key.get((scenario.name, contender), [])
                paired = {r["round"]: r for r in by_key.get((scenario.name, reference), [])}
                per_round = [
                    _ratio(_number(r, metric.key), _number(paired[r["round"]], metric.key))
                    for r in runs
                    if r["round"] in paired
                ]
                ratios[(contender, reference)] = median(per_round)
            if metric.key == "errors" and not any(
                _number(r, "errors") > 0
                for c in contenders
                for r in by_key.get((scenario.name, c), [])
            ):
                continue
            rows.append(Row(label(scenario), metric.label, values, ratios))
    return rows
