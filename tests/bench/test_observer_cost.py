"""bench/observer_cost.py: runs, prints one line per case with a positive figure."""

from __future__ import annotations

import re

import pytest

from bench import observer_cost

LABELS = [
    "metrics",
    "access log, json, to /dev/null",
    "access log, text, to /dev/null",
    "metrics + json access log",
]


def test_prints_one_positive_figure_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    observer_cost.main(["--n", "200", "--runs", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines] == LABELS
    for line in lines:
        match = re.fullmatch(r".+: (\d+\.\d\d) us per request", line)
        assert match, line
        assert float(match.group(1)) > 0


def test_exchanges_look_like_a_finished_stream() -> None:
    (e,) = observer_cost.exchanges(1)
    assert (e.status, e.stream, e.upstream_status, e.bytes_out) == (200, True, 200, 4000)
    assert [o.action for o in e.outcomes] == ["stripped", "neutral"]
    assert e.first_byte is not None and e.upstream_started is not None
    assert e.first_byte > e.upstream_started


@pytest.mark.parametrize("flag", ["--n", "--runs"])
def test_rejects_a_count_below_one(flag: str) -> None:
    with pytest.raises(SystemExit):
        observer_cost.main([flag, "0"])
