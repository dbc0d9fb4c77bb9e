"""Figures that tests measure (times, counts), printed in pytest's closing summary.

A pytest plugin (conftest names it): a test asks for the ``figure`` fixture
and calls it with a name and a value; nothing is asserted about the value.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

_FIGURES: list[tuple[str, str]] = []


@pytest.fixture
def figure() -> Callable[[str, str], None]:
    """Record a measured figure for the closing summary."""

    def record(name: str, value: str) -> None:
        _FIGURES.append((name, value))

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("measured figures")
        for name, value in _FIGURES:
            terminalreporter.write_line(f"{name}: {value}")
