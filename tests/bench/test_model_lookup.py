"""bench/model_lookup.py runs and prints the look-up's calls: two for a served name or an
alias (ModelRouter.route, Engines.target), so a change that adds work shows here."""

from __future__ import annotations

import pytest

from bench.model_lookup import main


def test_the_lookup_is_two_calls(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--deployments", "3", "--number", "10", "--rounds", "1"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()]
    calls = {row[0].strip(): int(row[1]) for row in rows if row and row[1].strip().isdigit()}
    assert calls == {"served name": 2, "alias": 2, "unknown (404)": 4}
