"""bench/limiter_cost.py runs end to end (a few decisions and requests) and prints its
two tables, with one EVALSHA per Redis decision."""

from __future__ import annotations

import pytest

from bench.limiter_cost import main


def test_the_bench_prints_each_store_and_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rounds", "1", "--number", "20"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ")]
    names = [row[0].strip() for row in rows]
    assert names == [
        "store",
        "local",
        "shared",
        "redis",
        "redis via redis-py (not used)",
        "gateway",
        "limits off",
        "limits on, local",
        "limits on, shared",
        "limits on, redis",
        "limits off, streams unmetered",
    ]
    assert rows[3][-1].strip() == "1.00 + 1.00"  # one round trip to admit, one to settle
