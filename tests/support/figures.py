"""Figures that tests measure (times, counts), printed in pytest's closing summary.

A pytest plugin (conftest names it): a test asks for the ``figure`` fixture
and calls it with a name and a value; nothing is asserted about the value.

A figure travels in its test's report (``user_properties``), not in a list of this
module: under pytest-xdist the test runs in a worker process and the summary is
printed by the controller, which sees only the reports.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

_KEY = "figure"
_FIGURES: list[str] = []


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Record a measured figure for the closing summary."""

    def record(name: str, value: str) -> None:
        request.node.user_properties.append((_KEY, f"{name}: {value}"))

    return record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # The teardown report carries every figure the test recorded (its fixtures' too); in
    # a worker the list is never printed, the controller gets the report and keeps them.
    if report.when == "teardown":
        _FIGURES.extend(str(value) for key, value in report.user_properties if key == _KEY)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("measured figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)
