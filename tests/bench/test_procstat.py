"""Reading CPU time and memory from /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.procstat import (
    cpu_seconds,
    cpu_seconds_precise,
    descendants,
    memory_kib,
    parse_schedstat_ns,
    parse_stat,
    parse_status_kib,
)

# Fields 14..17 (utime stime cutime cstime) are 11 22 3 4; the name holds ") (".
STAT = (
    "4242 (uvicorn: a) (b) S 17 4242 17 0 -1 4194560 3000 0 0 0 11 22 3 4 20 0 2 0 "
    "1000 300000000 9000 18446744073709551615 1 1 0 0 0 0 0 16781312 16386 0 0 0 17 1 0 0"
)
STATUS = (
    "Name:\tnginx\nVmPeak:\t  20000 kB\nVmHWM:\t   18000 kB\nVmRSS:\t   15000 kB\nThreads:\t1\n"
)


def test_parse_stat_survives_odd_command_names() -> None:
    stat = parse_stat(STAT)
    assert (stat.pid, stat.ppid) == (4242, 17)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (11, 22, 3, 4)
    assert stat.ticks == 40


@pytest.mark.parametrize(("key", "kib"), [("VmHWM", 18000), ("VmRSS", 15000)])
def test_parse_status(key: str, kib: int) -> None:
    assert parse_status_kib(STATUS, key) == kib


def test_parse_status_missing_key() -> None:
    with pytest.raises(KeyError):
        parse_status_kib(STATUS, "VmSwap")


def _fake_proc(root: Path, pid: int, ppid: int, *, utime: int, rss: int) -> None:
    entry = root / str(pid)
    entry.mkdir()
    fields = STAT.split(" ")
    fields[0] = str(pid)
    stat = (
        " ".join(fields).replace(" S 17 ", f" S {ppid} ").replace(" 11 22 3 4 ", f" {utime} 0 0 0 ")
    )
    (entry / "stat").write_text(stat)
    (entry / "status").write_text(f"Name:\tx\nVmHWM:\t{rss * 2} kB\nVmRSS:\t{rss} kB\n")


def test_tree_sums_a_master_and_its_workers(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 10, 1, utime=100, rss=1000)
    _fake_proc(tmp_path, 11, 10, utime=50, rss=500)
    _fake_proc(tmp_path, 12, 11, utime=25, rss=250)
    _fake_proc(tmp_path, 20, 1, utime=999, rss=999)
    (tmp_path / "self").mkdir()
    assert descendants(10, proc=tmp_path) == [10, 11, 12]
    assert cpu_seconds(10, proc=tmp_path) == pytest.approx(175 / os.sysconf("SC_CLK_TCK"))
    assert memory_kib(10, "VmRSS", proc=tmp_path) == 1750
    assert memory_kib(10, "VmHWM", proc=tmp_path) == 3500


def test_this_process_is_readable() -> None:
    assert descendants(os.getpid())[0] == os.getpid()
    assert memory_kib(os.getpid(), "VmRSS") > 0


def test_parse_schedstat() -> None:
    assert parse_schedstat_ns("149598 10163027 2\n") == 149598


def test_precise_cpu_time_of_this_process() -> None:
    seconds = cpu_seconds_precise(os.getpid())
    assert seconds > 0
