"""What each serving process says about its reloads, for ``ft-gateway reload``.

``serve`` makes a directory beside its pidfile (``PIDFILE.d``); every process that
serves (the one process, or each worker) keeps a file ``PID.json`` there with how
many reloads it has attempted and how the last one went. ``ft-gateway reload``
reads them before and after its SIGHUP, and so learns the result of that reload
in every process.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReloadStatus:
    """One process's reload count and last result (``started`` before any reload)."""

    pid: int
    generation: int
    result: str
    error: str | None = None
    changed: tuple[str, ...] = ()  # loaded: what changed


def status_dir(pidfile: Path) -> Path:
    """The directory of the status files of the gateway whose pidfile is ``pidfile``."""
    return pidfile.with_name(pidfile.name + ".d")


def write_status(directory: Path, status: ReloadStatus) -> None:
    """Replace this process's status file whole (a reader never sees half of one)."""
    staging = directory / f".{status.pid}.json.new"
    staging.write_text(json.dumps(asdict(status)))
    os.replace(staging, directory / f"{status.pid}.json")


def remove_status(directory: Path, pid: int) -> None:
    """Remove the status file of ``pid`` (it stops serving)."""
    with contextlib.suppress(OSError):
        (directory / f"{pid}.json").unlink()


def read_statuses(directory: Path) -> dict[int, ReloadStatus]:
    """The status of every process that has one in ``directory``."""
    found: dict[int, ReloadStatus] = {}
    for path in directory.glob("[0-9]*.json"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            fields = json.loads(path.read_text())
            status = ReloadStatus(**{**fields, "changed": tuple(fields.get("changed", ()))})
            found[status.pid] = status
    return found
