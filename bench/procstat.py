"""CPU time and memory of a process tree, read from /proc (Linux only).

A proxy may be several processes (nginx: a master and its worker), so every
figure is summed over the process and its live descendants.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat that the benchmark uses."""

    pid: int
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def ticks(self) -> int:
        """CPU time of the process and its reaped children, in clock ticks."""
        return self.utime + self.stime + self.cutime + self.cstime


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/PID/stat line; the command name may hold spaces and parentheses."""
    pid, _, rest = text.partition(" (")
    fields = rest[rest.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state) of proc(5): ppid is field 4, utime..cstime 14..17.
    return ProcStat(
        pid=int(pid),
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
    )


def parse_status_kib(text: str, key: str) -> int:
    """The value in KiB of ``key`` (``VmRSS``, ``VmHWM``) in a /proc/PID/status text."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    raise KeyError(key)


def descendants(pid: int, *, proc: Path = PROC) -> list[int]:
    """``pid`` and all its live descendants, parents first.

    Found by scanning every /proc/PID/stat for its parent, since
    /proc/PID/task/TID/children needs a kernel option that not every kernel has.
    """
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = parse_stat((entry / "stat").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        children.setdefault(stat.ppid, []).append(stat.pid)
    tree = [pid]
    for parent in tree:
        tree.extend(sorted(children.get(parent, [])))
    return tree


def cpu_seconds(pid: int, *, proc: Path = PROC) -> float:
    """User + system CPU time of ``pid``'s process tree, in seconds (10 ms resolution)."""
    ticks = 0
    for member in descendants(pid, proc=proc):
        try:
            ticks += parse_stat((proc / str(member) / "stat").read_text()).ticks
        except FileNotFoundError:
            continue
    return ticks / CLOCK_TICKS


def parse_schedstat_ns(text: str) -> int:
    """Time spent on a CPU, in nanoseconds, from a /proc/.../schedstat line."""
    return int(text.split()[0])


def cpu_seconds_precise(pid: int, *, proc: Path = PROC) -> float:
    """CPU time of the live threads of ``pid``'s process tree, to the nanosecond.

    Read from each thread's schedstat, since utime and stime come in clock ticks
    (10 ms): too coarse for a run of a few slow streams. Threads that ended
    during a run are not counted. Falls back to :func:`cpu_seconds` where the
    kernel has no schedstat.
    """
    total = 0
    for member in descendants(pid, proc=proc):
        try:
            tasks = list((proc / str(member) / "task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                total += parse_schedstat_ns((task / "schedstat").read_text())
            except FileNotFoundError:
                if not (proc / str(member) / "schedstat").exists():
                    return cpu_seconds(pid, proc=proc)
    return total / 1e9


def cpu_seconds_by_command(pid: int, *, proc: Path = PROC) -> dict[str, float]:
    """:func:`cpu_seconds_precise` of ``pid``'s tree, by each process's command name
    (``/proc/PID/comm``): what Envoy and its processor each spent, in one tree."""
    totals: dict[str, float] = {}
    for member in descendants(pid, proc=proc):
        try:
            name = (proc / str(member) / "comm").read_text().strip()
            tasks = list((proc / str(member) / "task").iterdir())
        except FileNotFoundError:
            continue
        spent = 0
        for task in tasks:
            try:
                spent += parse_schedstat_ns((task / "schedstat").read_text())
            except FileNotFoundError:
                continue
        totals[name] = totals.get(name, 0.0) + spent / 1e9
    return totals


def memory_kib(pid: int, key: str, *, proc: Path = PROC) -> int:
    """``key`` from /proc/PID/status (``VmRSS`` now, ``VmHWM`` peak) summed over the tree."""
    total = 0
    for member in descendants(pid, proc=proc):
        try:
            total += parse_status_kib((proc / str(member) / "status").read_text(), key)
        except (FileNotFoundError, KeyError):
            continue
    return total
