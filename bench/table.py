"""The benchmark's one table, as aligned plain text (it also reads as Markdown)."""

from __future__ import annotations

import math

from bench.results import REFERENCES, Row


def format_number(value: float) -> str:
    """Three significant figures or so, never scientific; ``-`` for a missing figure."""
    if math.isnan(value) or math.isinf(value):
        return "-"
    magnitude = abs(value)
    if magnitude >= 100 or value == int(value) and magnitude >= 1:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_table(rows: list[Row], contenders: list[str]) -> str:
    """One line per row: the figure for each contender, then each ratio column."""
    ratio_columns = sorted(
        {key for row in rows for key in row.ratios},
        key=lambda k: (_order(k[1], list(REFERENCES)), k[1], _order(k[0], contenders)),
    )
    header = ["scenario", "figure", *contenders, *(f"{c}/{r}" for c, r in ratio_columns)]
    lines = [header]
    previous = None
    for row in rows:
        scenario = row.scenario if row.scenario != previous else ""
        previous = row.scenario
        lines.append(
            [
                scenario,
                row.metric,
                *(format_number(row.values.get(c, math.nan)) for c in contenders),
                *(format_number(row.ratios.get(k, math.nan)) for k in ratio_columns),
            ]
        )
    return markdown(lines, left=2)


def markdown(lines: list[list[str]], *, left: int = 1) -> str:
    """``lines`` (the first is the header) as an aligned table: the first ``left``
    columns aligned left, the figures right."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for n, line in enumerate(lines):
        cells = [
            cell.ljust(widths[i]) if i < left else cell.rjust(widths[i])
            for i, cell in enumerate(line)
        ]
        out.append("| " + " | ".join(cells) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def _order(contender: str, contenders: list[str]) -> int:
    return contenders.index(contender) if contender in contenders else len(contenders)
