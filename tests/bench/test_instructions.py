"""bench/instructions.py reads the measured loop's count from callgrind's dumps, and
bench/callgrind.py each function's own instructions by library (the runs themselves
need valgrind, which the default suite does not install)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.callcounter import KINDS
from bench.callgrind import Measured, by_library, own_costs
from bench.instructions import loop_total, profile_tables
from bench.served import _request


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


# A dump in callgrind's format, names compressed: the interpreter's eval loop calls into
# orjson (the call's inclusive cost is orjson's, not the loop's), and libc.
DUMP = """version: 1
creator: callgrind-3.19.0
events: Ir
ob=(1) /usr/lib/libpython3.11.so.1.0
fl=(1) ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 100
cob=(2) /venv/site-packages/orjson/orjson.cpython-311-x86_64-linux-gnu.so
cfi=(2) ???
cfn=(2) loads
calls=2 0
11 40
+1 5
ob=(2)
fl=(2)
fn=(2)
0 40
ob=(3) /lib/x86_64-linux-gnu/libc.so.6
fl=(3) ???
fn=(3) memcpy
0 7
ob=(1)
fl=(1)
fn=(1)
12 3
summary: 155
"""


def test_each_function_keeps_its_own_instructions_not_its_callees(tmp_path: Path) -> None:
    costs = own_costs(DUMP.splitlines())
    python = "/usr/lib/libpython3.11.so.1.0"
    orjson = "/venv/site-packages/orjson/orjson.cpython-311-x86_64-linux-gnu.so"
    assert costs == {
        (python, "_PyEval_EvalFrameDefault"): 108,
        (orjson, "loads"): 40,
        ("/lib/x86_64-linux-gnu/libc.so.6", "memcpy"): 7,
    }
    assert sum(costs.values()) == 155  # the dump's own total
    assert by_library(costs) == {
        "the interpreter (libpython)": 108,
        "orjson": 40,
        "libc (malloc, memcpy, syscalls' wrappers)": 7,
    }
    dump = tmp_path / "callgrind.out.1"
    dump.write_text(DUMP)
    measured = Measured.of(dump, 5, profile=True)
    assert measured.per_request == 31 and measured.costs is not None
    assert Measured.of(dump, 5, profile=False) == Measured(31)
    table = profile_tables(measured, top=2)
    assert "| the interpreter (libpython) |" in table and "loads" in table
    assert "| memcpy " not in table.split("function (own")[1]  # past the top two


def test_a_served_request_is_the_kinds_body_on_its_route() -> None:
    kind = next(k for k in KINDS if k.name == "embeddings json")
    head, _, body = _request(kind).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/embeddings HTTP/1.1"
    assert "x-fake-embeddings-width: 64" in lines
    assert f"content-length: {len(body)}" in lines and orjson.loads(body) == kind.body
