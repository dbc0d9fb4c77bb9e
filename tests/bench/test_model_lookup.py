"""bench/model_lookup.py runs and prints the look-up's calls: three for a served name or an
alias (ModelRouter.route, deployment_of, Engines.target), so a change that adds work shows here."""

from __future__ import annotations

import pytest

from bench.model_lookup import main


def test_the_lookup_is_two_calls(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--deployments", "3", "--number", "10", "--rounds", "1"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()]
    calls = {row[0].strip(): int(row[1]) for row in rows if row and row[1].strip().isdigit()}
    # Three since the model's step has a seam without the request
    # (ModelRouter.deployment_of, which a batch's validation asks of each line).
    assert calls == {"served name": 3, "alias": 3, "unknown (404)": 5}
