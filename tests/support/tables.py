"""Reading back the Markdown tables the benches print."""

from __future__ import annotations


def first_cells(out: str) -> list[str]:
    """The first cell of each table row in ``out`` (headers included), in order."""
    return [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
