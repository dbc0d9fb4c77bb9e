"""bench/store_cost.py runs end to end (a few requests) and prints its table."""

from __future__ import annotations

import pytest

from bench.store_cost import main


def test_the_bench_prints_a_row_per_kind_and_store_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rounds", "1", "--number", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert rows == [
        "request",
        "first turn, store none",
        "first turn, SQLite (write)",
        "second turn, SQLite (read + write)",
        "store.put (one answer)",
        "store.get (one continuation)",
    ]
