"""``ft-gateway reload``: make the running gateway reload, and say how it went.

It finds the gateway by its pidfile (the one ``serve`` would use with the same
config, flags and environment; see gateway/serving/pidfile.py), sends it SIGHUP
(under ``--workers`` the parent passes it on to every worker) and waits until
every serving process has written the result of that reload
(gateway/app/reloadstatus.py). Exit status: 0 reloaded (or nothing changed), 1
the gateway refused the reload (nothing changed; the reasons are printed), 2 no
gateway to reload, or no answer in time.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gateway.app.reloadstatus import ReloadStatus, read_statuses, status_dir
from gateway.serving.pidfile import PidfileError, live_pid, pidfile_of
from gateway.settings import config_path, load_settings
from gateway.yamlsource import SourceError

_POLL_SECONDS = 0.05


def add_arguments(p: Any) -> None:
    """The command's flags."""
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("--port", type=int, help="the port serve was given, if not the config's")
    p.add_argument("--pidfile", help="the gateway's pidfile (default: as serve's, see --help)")
    p.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the result (default 60)"
    )


def _fail(message: str, status: int) -> int:
    print(f"ft-gateway reload: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    """Reload the gateway; 0 done, 1 refused, 2 no gateway or no answer."""
    if args.pidfile:
        path: Path | None = Path(args.pidfile)
    else:
        try:
            overrides: dict[tuple[str, ...], Any] = {("listen", "port"): args.port}
            path = pidfile_of(load_settings(config_path(args.config), overrides=overrides))
        except SourceError as exc:
            return _fail(
                f"cannot read the config to find the gateway (or give --pidfile):\n{exc}", 2
            )
    if path is None:
        return _fail("port 0 and no server.pidfile: give --pidfile", 2)
    try:
        pid = live_pid(path)
    except PidfileError as exc:
        return _fail(str(exc), 2)
    directory = status_dir(path)
    before = read_statuses(directory)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        return _fail(f"cannot signal the gateway (pid {pid}): {exc.strerror}", 2)
    deadline = time.monotonic() + args.timeout
    while (done := _settled(before, read_statuses(directory))) is None:
        if time.monotonic() > deadline:
            return _fail(f"no result from the gateway (pid {pid}) in {args.timeout:g} s", 2)
        time.sleep(_POLL_SECONDS)
    return _report(done)


def _settled(
    before: dict[int, ReloadStatus], now: dict[int, ReloadStatus]
) -> list[ReloadStatus] | None:
    """Every serving process's status after the reload, or None while one is pending.
    A process that stopped meanwhile is not waited for; one started meanwhile loaded
    the files at start."""
    pending = [p for p in before if p in now] or list(now)
    if not pending or any(now[p].generation <= _generation(before, p) for p in pending):
        return None
    return [now[p] for p in pending]


def _generation(statuses: dict[int, ReloadStatus], pid: int) -> int:
    status = statuses.get(pid)
    return status.generation if status is not None else 0


def _report(statuses: list[ReloadStatus]) -> int:
    pids = ", ".join(str(s.pid) for s in sorted(statuses, key=lambda s: s.pid))
    failed = [s for s in statuses if s.result == "failed"]
    if failed:
        errors = dict.fromkeys(s.error or "unknown error" for s in failed)
        return _fail(
            f"refused by {len(failed)} of {len(statuses)} processes (pids {pids}); "
            "nothing changed:\n" + "\n".join(errors),
            1,
        )
    changed = sorted({c for s in statuses for c in s.changed})
    what = "reloaded " + ", ".join(changed) if changed else "nothing changed"
    print(f"ft-gateway reload: {what} ({len(statuses)} processes, pids {pids})")
    return 0
