"""bench/responses_cost.py runs end to end (a few requests) and prints its table."""

from __future__ import annotations

import pytest

from bench.responses_cost import main
from tests.support.tables import printed_rows


def test_the_bench_prints_chat_and_responses_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert printed_rows(main, ["--rounds", "1", "--number", "3"], capsys) == [
        "request",
        "json chat",
        "json responses",
        "stream chat",
        "stream responses",
        "paced stream chat",
        "paced stream responses",
    ]
