"""bench/fanout_cost.py runs end to end (a few requests) and prints its two tables."""

from __future__ import annotations

import pytest

from bench.fanout_cost import main
from tests.support.tables import printed_rows


def test_the_bench_prints_single_and_fanout_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rounds", "1", "--number", "3", "--n", "2"]
    assert printed_rows(main, argv, capsys) == [
        "request",
        "json single",
        "json n=2",
        "stream single",
        "stream n=2",
        "paced stream single",
        "paced stream n=2",
        "step",
        "checked (single relay and fan-out)",
        "rewritten (fan-out only)",
    ]
