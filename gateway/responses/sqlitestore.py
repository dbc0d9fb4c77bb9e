"""The response store in a SQLite file: the default, shared by every worker of one host.

With no ``store.path`` the file is ``responses.sqlite3`` in the gateway's state
directory (``$XDG_STATE_HOME/ft-gateway``, else ``~/.local/state/ft-gateway``),
which must be the user's own (gateway/private.py). Wherever it is, the file is
made 0600 before SQLite opens it (SQLite gives its ``-wal`` and ``-shm`` the
file's mode; ones left wider by an older gateway are narrowed) and a missing
directory is made 0700. WAL mode lets the workers of one ``serve --workers N``
read while one writes; a busy file is waited on for a bounded time. The file is
opened on first use (in the worker that serves, never in a parent before it
forks), so a directory that cannot be made or a file that cannot be written is a
503 ``store_unavailable`` on the requests that need the store, and the gateway
itself still starts. Expired rows go on writes, a few at a time: no separate job.
Each owner's stored bytes are a row of ``usage``, kept with every write, delete
and sweep in the same transaction (the owner's quota reads it: store.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gateway.private import open_private, private_directory, state_dir
from gateway.responses.store import StoredResponse, unavailable, visible

_T = TypeVar("_T")
FILE = "responses.sqlite3"
# Seconds a write waits for another worker's: bounded, so a stuck file is a 503, not a hang.
BUSY_TIMEOUT = 5.0
# Expired rows removed per write: the cost of a write stays flat however many expired.
SWEEP = 32

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses "
    "(id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL, data BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires)",
    "CREATE INDEX IF NOT EXISTS responses_owner ON responses (owner, expires)",
)
_VERSION = 1  # PRAGMA user_version: 1, the owners' usage is kept
_USAGE = "CREATE TABLE IF NOT EXISTS usage (owner TEXT PRIMARY KEY, bytes INTEGER NOT NULL)"
# A file of an older gateway: its owners' rows counted once, when the table is made
# (the expired too: each is taken off again as it is swept).
_COUNT = "INSERT INTO usage SELECT owner, sum(length(data)) FROM responses GROUP BY owner"
_PUT = "INSERT OR REPLACE INTO responses (id, owner, expires, data) VALUES (?, ?, ?, ?)"
_SWEEP = (
    "DELETE FROM responses WHERE id IN "
    f"(SELECT id FROM responses WHERE expires <= ? LIMIT {SWEEP}) RETURNING owner, length(data)"
)
_EXPIRED = "DELETE FROM responses WHERE owner = ? AND expires <= ? RETURNING length(data)"
_ADD = (
    "INSERT INTO usage (owner, bytes) VALUES (?, ?) "
    "ON CONFLICT (owner) DO UPDATE SET bytes = max(bytes + excluded.bytes, 0) RETURNING bytes"
)
_HELD = "SELECT bytes FROM usage WHERE owner = ?"


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the store is kept when ``store.path`` is unset."""
    return state_dir(environ) / FILE


class SqliteStore:
    """Responses in a SQLite file; its calls run on a thread, off the event loop."""

    def __init__(self, path: Path | None, ttl: float) -> None:
        self.ttl = ttl
        self.path = path if path is not None else default_path()
        self._private = path is None  # the state directory is ours: checked, 0700
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0

    def _open(self) -> sqlite3.Connection:
        if self._db is not None and self._pid == os.getpid():
            return self._db
        parent = self.path.parent
        if self._private:
            private_directory(parent)
        elif not parent.exists():
            parent.mkdir(mode=0o700, parents=True)
        os.close(open_private(self.path, os.O_RDWR | os.O_CREAT))
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.close(open_private(Path(f"{self.path}{suffix}"), os.O_RDONLY))
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # No fsync per answer (Redis's own default is the same trade): a process that
            # dies loses nothing; a host that loses power may lose the last few responses.
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                db.execute(statement)
            db.commit()
            if db.execute("PRAGMA user_version").fetchone()[0] < _VERSION:
                db.execute("BEGIN IMMEDIATE")  # one worker migrates; the others wait
                if db.execute("PRAGMA user_version").fetchone()[0] < _VERSION:
                    db.execute(_USAGE)
                    db.execute(_COUNT)
                    db.execute(f"PRAGMA user_version = {_VERSION}")
                db.commit()
        except sqlite3.Error:
            db.close()
            raise
        self._db, self._pid = db, os.getpid()
        return db

    async def _transact(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` in one transaction, on a thread."""

        def run() -> _T:
            with self._lock:
                db = self._open()
                try:
                    result = work(db)
                    db.commit()
                except sqlite3.Error:
                    db.rollback()
                    raise
                return result

        try:
            return await asyncio.to_thread(run)
        except (sqlite3.Error, OSError) as exc:
            raise unavailable("sqlite", exc, path=str(self.path)) from exc

    async def _run(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        return await self._transact(lambda db: db.execute(sql, args).fetchall())

    @staticmethod
    def _freed(db: sqlite3.Connection, rows: list[tuple[str, int]]) -> None:
        """Deleted rows (owner, size) taken off their owners' usage."""
        by_owner: dict[str, int] = {}
        for owner, size in rows:
            by_owner[owner] = by_owner.get(owner, 0) + size
        for owner, size in by_owner.items():
            db.execute(_ADD, (owner, -size)).fetchall()

    async def put(self, record: StoredResponse) -> int:
        now = time.time()
        data = record.dumps()

        def put(db: sqlite3.Connection) -> int:
            self._freed(db, db.execute(_SWEEP, (now,)).fetchall())
            db.execute(_PUT, (record.response["id"], record.owner, now + self.ttl, data))
            (held,) = db.execute(_ADD, (record.owner, len(data))).fetchone()
            return int(held)

        return await self._transact(put)

    async def held(self, owner: str) -> int:
        now = time.time()

        def held(db: sqlite3.Connection) -> int:
            # Every expired row of the owner's (only a refusal asks: the bound is its).
            self._freed(db, [(owner, size) for (size,) in db.execute(_EXPIRED, (owner, now))])
            row = db.execute(_HELD, (owner,)).fetchone()
            return int(row[0]) if row is not None else 0

        return await self._transact(held)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        rows = await self._run(
            "SELECT data FROM responses WHERE id = ? AND owner = ? AND expires > ?",
            (response_id, owner, time.time()),
        )
        return visible(rows[0][0], owner) if rows else None

    async def delete(self, response_id: str, owner: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            rows = db.execute(
                "DELETE FROM responses WHERE id = ? AND owner = ? AND expires > ? "
                "RETURNING length(data)",
                (response_id, owner, time.time()),
            ).fetchall()
            if rows:
                db.execute(_ADD, (owner, -rows[0][0])).fetchall()
            return bool(rows)

        return await self._transact(delete)

    async def aclose(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None
