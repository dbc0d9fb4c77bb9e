"""bench/duplicate_cost.py runs and prints a row per body, beside a baseline's module."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.duplicate_cost import main

ROOT = Path(__file__).resolve().parents[2]


def test_each_body_gets_a_row_with_the_baselines_figure(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--mb", "0.01", "--rounds", "1", "--baseline", str(ROOT)])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        (shape, body)
        for shape in ("messages", "{a:0}")
        for body in ("plain", "one duplicate", "one \\u003a escape")
    ]
    assert all(float(cell) >= 0 for row in rows for cell in row[2:])
