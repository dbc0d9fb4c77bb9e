"""Files only the gateway's user may read: a private directory, checked, and files made
in it (or anywhere) without following a link another user left in the way.

The pidfile and the response store's SQLite file live in the user's runtime or
state directory. On a shared machine another user who could put a symbolic link
(or a file of theirs) where the gateway writes would make it overwrite a file of
its user's, keep it from starting, or read what it keeps. So a directory of the
gateway's is a real directory (not a link) owned by the user, 0700; a file is
opened with ``O_NOFOLLOW`` (a link in its place is refused, never followed),
created 0600, and must be a regular file owned by the user with one link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The gateway's state directory: ``$XDG_STATE_HOME/ft-gateway``, else
    ``~/.local/state/ft-gateway`` (the XDG base-directory default)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_STATE_HOME")
    if base and Path(base).is_absolute():
        return Path(base) / "ft-gateway"
    return Path(environ.get("HOME") or Path.home()) / ".local" / "state" / "ft-gateway"


class NotPrivate(OSError):
    """A path the gateway would keep private is not: a link, another user's, shared."""


def private_directory(path: Path) -> Path:
    """``path`` as a directory only this user may use: made 0700 (its missing parents
    too) where absent; an existing one must be a directory, not a link, owned by this
    user (its mode is narrowed to 0700). NotPrivate otherwise."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise NotPrivate(f"{path} is not a directory (a link is not followed)")
    if info.st_uid != os.geteuid():
        raise NotPrivate(f"{path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700, follow_symlinks=False)
    return path


def checked(fd: int, path: Path) -> int:
    """``fd`` (open on ``path``) if it is a regular file of this user's with one link,
    narrowed to 0600; NotPrivate (``fd`` closed) otherwise."""
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_nlink != 1:
        problem = "has other hard links"
    if problem is not None:
        os.close(fd)
        raise NotPrivate(f"{path} {problem}")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.fchmod(fd, 0o600)
    return fd


def open_private(path: Path, flags: int = os.O_RDWR) -> int:
    """A descriptor of ``path``, created 0600 if absent, never through a link (``flags``
    without O_CREAT opens an existing file only); NotPrivate if it is not this user's
    own regular file, OSError as ``os.open`` raises it."""
    try:
        if flags & os.O_CREAT:
            try:
                fd = os.open(path, flags | os.O_EXCL | _NOFOLLOW, 0o600)
            except FileExistsError:
                fd = os.open(path, (flags & ~os.O_CREAT) | _NOFOLLOW)
        else:
            fd = os.open(path, flags | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the last component is a symbolic link
            raise NotPrivate(f"{path} is a symbolic link (not followed)") from None
        raise
    return checked(fd, path)
