"""The printed table."""

from __future__ import annotations

import math

import pytest

from bench.results import Row
from bench.table import format_number, format_table


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12345.6, "12346"),
        (123.4, "123"),
        (12.34, "12.3"),
        (1.234, "1.23"),
        (0.01234, "0.012"),
        (-0.5, "-0.500"),
        (3.0, "3"),
        (0.0, "0.000"),
        (math.nan, "-"),
    ],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text


def test_table_has_a_column_per_contender_and_ratio() -> None:
    rows = [
        Row(
            "chat c=1",
            "req/s",
            {"direct": 5000.0, "nginx": 4000.0, "naive": 100.0, "gateway": 2000.0},
            {("gateway", "nginx"): 0.5, ("gateway", "naive"): 20.0, ("naive", "nginx"): 0.025},
        ),
        Row("chat c=1", "CPU us/req", {"direct": math.nan, "nginx": 20.0}, {}),
    ]
    text = format_table(rows, ["direct", "nginx", "naive", "gateway"])
    lines = text.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [
        "scenario",
        "figure",
        "direct",
        "nginx",
        "naive",
        "gateway",
        "naive/nginx",
        "gateway/nginx",
        "gateway/naive",
    ]
    assert set(lines[1]) == {"|", "-"}
    first = [cell.strip() for cell in lines[2].strip("|").split("|")]
    assert first == ["chat c=1", "req/s", "5000", "4000", "100", "2000", "0.025", "0.500", "20"]
    second = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert second[:4] == ["", "CPU us/req", "-", "20"]
    assert second[-3:] == ["-", "-", "-"]
    assert len({len(line) for line in lines}) == 1
