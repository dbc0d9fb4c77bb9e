"""bench/instructions.py reads the measured loop's count from callgrind's dumps (the
runs themselves need valgrind, which the default suite does not install)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.instructions import loop_total


def _dump(path: Path, total: int) -> Path:
    path.write_text(f"version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: {total}\n")
    return path


def test_the_loop_is_the_dump_written_at_the_second_marker(tmp_path: Path) -> None:
    dumps = [
        _dump(tmp_path / "callgrind.out.2", 700),  # the loop
        _dump(tmp_path / "callgrind.out.1", 9_000_000),  # start-up and warm-up
        _dump(tmp_path / "callgrind.out.3", 50),  # after the loop
    ]
    assert loop_total(dumps) == 700


def test_a_run_without_the_loops_dump_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no dump"):
        loop_total([_dump(tmp_path / "callgrind.out.1", 9)])
