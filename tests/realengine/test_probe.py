"""``ft-gateway probe`` against each real engine: it measures every route, and the policy
it writes passes ``ft-gateway check`` as it is."""

from __future__ import annotations

import pytest

from tests.realengine.probing import Probed, assert_check_passes

pytestmark = pytest.mark.realengine


def test_the_probe_measures_each_route(probed: Probed) -> None:
    assert probed.returncode == 0, probed.output
    report = probed.report.read_text()
    for route in ("## /v1/chat/completions", "## /v1/completions", "## /v1/responses"):
        assert route in report
    assert "Not measured" not in report


def test_the_written_policy_passes_check(probed: Probed) -> None:
    assert_check_passes(probed.policy)
