"""The response store in a SQLite file: the default, shared by every worker of one host.

With no ``store.path`` the file is ``responses.sqlite3`` in the gateway's state
directory (``$XDG_STATE_HOME/ft-gateway``, else ``~/.local/state/ft-gateway``),
made with private permissions. WAL mode lets the workers of one ``serve
--workers N`` read while one writes; a busy file is waited on for a bounded
time. The file is opened on first use (in the worker that serves, never in a
parent before it forks), so a directory that cannot be made or a file that
cannot be written is a 503 ``store_unavailable`` on the requests that need the
store, and the gateway itself still starts. Expired rows go on writes, a few
at a time: no separate job.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.responses.store import StoredResponse, unavailable, visible

FILE = "responses.sqlite3"
# Seconds a write waits for another worker's: bounded, so a stuck file is a 503, not a hang.
BUSY_TIMEOUT = 5.0
# Expired rows removed per write: the cost of a write stays flat however many expired.
SWEEP = 32

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses "
    "(id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL, data BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires)",
)
_PUT = "INSERT OR REPLACE INTO responses (id, owner, expires, data) VALUES (?, ?, ?, ?)"
_SWEEP = (
    f"DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires <= ? LIMIT {SWEEP})"
)


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The gateway's state directory: ``$XDG_STATE_HOME/ft-gateway``, else
    ``~/.local/state/ft-gateway`` (the XDG base-directory default)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_STATE_HOME")
    if base and Path(base).is_absolute():
        return Path(base) / "ft-gateway"
    return Path(environ.get("HOME") or Path.home()) / ".local" / "state" / "ft-gateway"


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the store is kept when ``store.path`` is unset."""
    return state_dir(environ) / FILE


class SqliteStore:
    """Responses in a SQLite file; its calls run on a thread, off the event loop."""

    def __init__(self, path: Path | None, ttl: float) -> None:
        self.ttl = ttl
        self.path = path if path is not None else default_path()
        self._private = path is None  # the state directory is ours: made 0700
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0

    def _open(self) -> sqlite3.Connection:
        if self._db is not None and self._pid == os.getpid():
            return self._db
        parent = self.path.parent
        if self._private:
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # No fsync per answer (Redis's own default is the same trade): a process that
            # dies loses nothing; a host that loses power may lose the last few responses.
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                db.execute(statement)
            db.commit()
        except sqlite3.Error:
            db.close()
            raise
        self._db, self._pid = db, os.getpid()
        return db

    async def _run(self, *statements: tuple[str, tuple[Any, ...]]) -> list[Any]:
        """The statements in one transaction; the last one's rows."""

        def run() -> list[Any]:
            with self._lock:
                db = self._open()
                try:
                    rows: list[Any] = []
                    for sql, args in statements:
                        rows = db.execute(sql, args).fetchall()
                    db.commit()
                except sqlite3.Error:
                    db.rollback()
                    raise
                return rows

        try:
            return await asyncio.to_thread(run)
        except (sqlite3.Error, OSError) as exc:
            raise unavailable("sqlite", exc, path=str(self.path)) from exc

    async def put(self, record: StoredResponse) -> None:
        now = time.time()
        await self._run(
            (_SWEEP, (now,)),
            (_PUT, (record.response["id"], record.owner, now + self.ttl, record.dumps())),
        )

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        rows = await self._run(
            (
                "SELECT data FROM responses WHERE id = ? AND owner = ? AND expires > ?",
                (response_id, owner, time.time()),
            )
        )
        return visible(rows[0][0], owner) if rows else None

    async def delete(self, response_id: str, owner: str) -> bool:
        rows = await self._run(
            (
                "DELETE FROM responses WHERE id = ? AND owner = ? AND expires > ? RETURNING id",
                (response_id, owner, time.time()),
            )
        )
        return bool(rows)

    async def aclose(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None
