"""Reading back the Markdown tables the benches print."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest


def first_cells(out: str) -> list[str]:
    """The first cell of each table row in ``out`` (headers included), in order."""
    return [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]


def printed_rows(
    main: Callable[[Sequence[str]], int],
    argv: Sequence[str],
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """Run a bench's ``main(argv)``, which must return 0, and read back the first cell of
    each row of the tables it printed."""
    assert main(argv) == 0
    return first_cells(capsys.readouterr().out)
