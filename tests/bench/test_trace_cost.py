"""bench/trace_cost.py: runs, a row per case and request, tracing at 1.0 exports spans."""

from __future__ import annotations

import pytest

from bench import trace_cost


def test_prints_a_row_per_case_and_request(capsys: pytest.CaptureFixture[str]) -> None:
    assert trace_cost.main(["--rounds", "1", "--number", "5"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| chat")]
    assert len(rows) == 2 * len(trace_cost.CASES)
    for row in rows:
        assert float(row.split("|")[3]) > 0


def test_off_alone_runs_as_before_tracing(capsys: pytest.CaptureFixture[str]) -> None:
    assert trace_cost.main(["--rounds", "1", "--number", "5", "--only", "off"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| chat")]
    assert [row.split("|")[2].strip() for row in rows] == ["off", "off"]
