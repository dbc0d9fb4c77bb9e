"""The pidfile ``serve`` keeps, so that ``ft-gateway reload`` signals this gateway and
no other process.

``server.pidfile`` in the config, else ``ft-gateway-PORT.pid`` in a directory of the
user's own: ``$XDG_RUNTIME_DIR/ft-gateway`` where the runtime directory is set, else
the state directory the response store uses (``$XDG_STATE_HOME/ft-gateway``, else
``~/.local/state/ft-gateway``); none with port 0 unless configured. Never the shared
temporary directory: there another user could leave a link or a file of theirs
where the pidfile goes (gateway/private.py). The default directory is made 0700 and
must be the user's; the file is opened without following a link, created 0600, and
must be the user's own regular file, wherever it is.

``serve`` holds an exclusive ``flock`` on it while it runs and removes it at exit.
The lock, not the file, says that a gateway is alive: a file left behind by a killed
gateway is never taken for a live one, so its pid (perhaps another process's by
now) is never signalled, and a second ``serve`` with the same pidfile refuses to
start. ``reload`` signals the pid written there only if that very process holds the
lock on that very file (``/proc/locks``, where the system has it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from gateway.app.reloadstatus import status_dir
from gateway.private import NotPrivate, open_private, private_directory, state_dir
from gateway.settings import Settings

_ELSEWHERE = "set server.pidfile (or FT_GATEWAY_SERVER__PIDFILE) to a path of your own"
LOCKS = Path("/proc/locks")


class PidfileError(Exception):
    """No live gateway holds the pidfile, or it cannot be written."""


class PidfileBusy(PidfileError):
    """Another live gateway holds the pidfile."""


def default_directory() -> Path:
    """Where the pidfile goes when ``server.pidfile`` is unset: the user's runtime
    directory's ``ft-gateway``, else the state directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / "ft-gateway"
    return state_dir()


def pidfile_of(settings: Settings) -> Path | None:
    """The pidfile of a gateway with these settings (None: port 0 and none configured)."""
    if settings.server.pidfile is not None:
        return settings.server.pidfile
    if settings.listen.port == 0:
        return None
    return default_directory() / f"ft-gateway-{settings.listen.port}.pid"


@contextlib.contextmanager
def serving_pidfile(settings: Settings) -> Iterator[Path | None]:
    """Hold the pidfile of a gateway with ``settings`` while the block runs; yields its
    path, or None where there is none or it cannot be written (said on stderr: the
    gateway serves, SIGHUP reloads it, ``ft-gateway reload`` cannot find it).
    PidfileBusy if another gateway holds it."""
    path = pidfile_of(settings)
    if path is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            if settings.server.pidfile is None:
                private_directory(path.parent)
            stack.enter_context(holding_pidfile(path))
        except PidfileBusy:
            raise
        except OSError as exc:  # the default directory: not ours, or cannot be made
            _warn(f"no pidfile ({exc}); {_ELSEWHERE}")
            path = None
        except PidfileError as exc:
            _warn(str(exc))
            path = None
        yield path


def _warn(message: str) -> None:
    print(
        f"ft-gateway: warning: {message} ('ft-gateway reload' cannot find this gateway)",
        file=sys.stderr,
    )


def _reason(exc: OSError) -> str:
    return str(exc) if isinstance(exc, NotPrivate) else str(exc.strerror or exc)


@contextlib.contextmanager
def holding_pidfile(path: Path) -> Iterator[None]:
    """Write our pid to ``path`` and hold it (and its status directory) until the block
    exits; PidfileError if a live gateway holds it already, or it cannot be written
    safely (a link, another user's file)."""
    try:
        fd = open_private(path, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        raise PidfileError(
            f"cannot write the pidfile {path}: {_reason(exc)}; {_ELSEWHERE}"
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
                if os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd)):
                    path.unlink()  # ours still, not a file put in its place
    finally:
        os.close(fd)


def live_pid(path: Path) -> int:
    """The pid of the gateway that holds ``path`` now; PidfileError if none does, if
    the file is not this user's own, or if the pid it names does not hold it."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        raise PidfileError(f"no gateway is running: {path} does not exist") from None
    except OSError as exc:
        raise PidfileError(f"cannot read {path}: {_reason(exc)}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            holders = lock_holders(os.fstat(fd))
            if holders is not None and pid not in holders:
                raise PidfileError(
                    f"{path} names pid {pid}, which does not hold it: not signalled"
                ) from None
            return pid
        raise PidfileError(f"no gateway is running: {path} was left by one that has stopped")
    finally:
        os.close(fd)


def lock_holders(info: os.stat_result, locks: Path = LOCKS) -> set[int] | None:
    """The pids holding a ``flock`` on the file of ``info`` (None: the system does not
    say: no ``/proc/locks``, or no line for the file's inode). By inode alone: a
    filesystem such as btrfs shows another device number there than ``stat`` gives."""
    try:
        text = locks.read_text()
    except OSError:
        return None
    inode = str(info.st_ino)
    holders = set()
    for line in text.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiter's line has "->")
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and "->" not in fields:
            if fields[5].rpartition(":")[2] == inode and fields[4].isdigit():
                holders.add(int(fields[4]))
    return holders or None


def _read_pid(fd: int) -> int:
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    if not text.isdigit():
        raise PidfileError(f"the pidfile holds no pid: {text!r}")
    return int(text)
