"""The pidfile ``serve`` keeps, so that ``ft-gateway reload`` signals this gateway and
no other process.

``server.pidfile`` in the config, else ``ft-gateway-PORT.pid`` in
``$XDG_RUNTIME_DIR`` (per user), else in the temporary directory (``$TMPDIR``,
``/tmp``); none with port 0 unless configured. ``serve`` holds an exclusive
``flock`` on it while it runs and removes it at exit. The lock, not the file,
says that a gateway is alive: a file left behind by a killed gateway is never
taken for a live one, so its pid (perhaps another process's by now) is never
signalled, and a second ``serve`` with the same pidfile refuses to start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gateway.app.reloadstatus import status_dir
from gateway.settings import Settings

_ELSEWHERE = "set server.pidfile (or FT_GATEWAY_SERVER__PIDFILE) to a path of your own"


class PidfileError(Exception):
    """No live gateway holds the pidfile, or it cannot be written."""


class PidfileBusy(PidfileError):
    """Another live gateway holds the pidfile."""


def pidfile_of(settings: Settings) -> Path | None:
    """The pidfile of a gateway with these settings (None: port 0 and none configured)."""
    if settings.server.pidfile is not None:
        return settings.server.pidfile
    if settings.listen.port == 0:
        return None
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"ft-gateway-{settings.listen.port}.pid"


@contextlib.contextmanager
def serving_pidfile(settings: Settings) -> Iterator[Path | None]:
    """Hold the pidfile of a gateway with ``settings`` while the block runs; yields its
    path, or None where there is none or it cannot be written (said on stderr: the
    gateway serves, SIGHUP reloads it, ``ft-gateway reload`` cannot find it).
    PidfileBusy if another gateway holds it."""
    try:
        path = pidfile_of(settings)
    except OSError as exc:  # no usable temporary directory
        path = None
        _warn(f"no pidfile ({exc}); {_ELSEWHERE}")
    if path is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(holding_pidfile(path))
        except PidfileBusy:
            raise
        except PidfileError as exc:
            _warn(str(exc))
            path = None
        yield path


def _warn(message: str) -> None:
    print(
        f"ft-gateway: warning: {message} ('ft-gateway reload' cannot find this gateway)",
        file=sys.stderr,
    )


@contextlib.contextmanager
def holding_pidfile(path: Path) -> Iterator[None]:
    """Write our pid to ``path`` and hold it (and its status directory) until the block
    exits; PidfileError if a live gateway holds it already, or it cannot be written."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PidfileError(
            f"cannot write the pidfile {path}: {exc.strerror}; {_ELSEWHERE}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PidfileBusy(
                f"another gateway (pid {_read_pid(fd)}) holds the pidfile {path}; "
                f"stop it, or {_ELSEWHERE}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        statuses = status_dir(path)
        try:
            shutil.rmtree(statuses, ignore_errors=True)  # a killed gateway's
            try:
                statuses.mkdir(mode=0o700)  # reload errors name paths: ours alone
            except OSError as exc:
                raise PidfileError(
                    f"cannot make {statuses}: {exc.strerror}; {_ELSEWHERE}"
                ) from None
            yield
        finally:
            shutil.rmtree(statuses, ignore_errors=True)
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


def live_pid(path: Path) -> int:
    """The pid of the gateway that holds ``path`` now; PidfileError if none does."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise PidfileError(f"no gateway is running: {path} does not exist") from None
    except OSError as exc:
        raise PidfileError(f"cannot read {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd)
        raise PidfileError(f"no gateway is running: {path} was left by one that has stopped")
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int:
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    if not text.isdigit():
        raise PidfileError(f"the pidfile holds no pid: {text!r}")
    return int(text)
