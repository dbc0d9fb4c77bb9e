"""The embedded batch store: file bytes on disk, everything else in a SQLite file.

By default both live in ``batches/`` of the gateway's state directory (beside
the response store's ``responses.sqlite3``), made with private permissions;
``batches.directory`` moves them. Every worker of one host shares them (WAL
mode, a bounded wait on a busy file). A file's bytes are written to a
temporary name, flushed to disk and renamed, before its row is committed, so a
crash leaves either the whole file or none; a full disk or an unwritable
directory is StoreUnavailable (503 ``store_unavailable`` to a client, a pause
for the runner), never a half-kept file. A batch's own copy of its input is a
hard link to the upload (no second copy of the bytes): deleting the upload
does not take it from a batch that is running. A line's result and the check
that its writer holds the batch's lease are one transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from gateway.batches.store import FINAL, Change, FileRecord
from gateway.errors import StoreUnavailable
from gateway.private import state_dir
from gateway.responses.sqlitestore import BUSY_TIMEOUT
from gateway.settings import Batches

FILE = "batches.sqlite3"
T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "created REAL NOT NULL, expires REAL, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "created REAL NOT NULL, status TEXT NOT NULL, expires REAL, data BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS batches_status ON batches (status)",
    "CREATE TABLE IF NOT EXISTS results (batch TEXT NOT NULL, line INTEGER NOT NULL, "
    "failed INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (batch, line))",
    "CREATE TABLE IF NOT EXISTS leases (batch TEXT PRIMARY KEY, holder TEXT NOT NULL, "
    "expires REAL NOT NULL)",
)


def default_directory() -> Path:
    """Where files and batches are kept when ``batches.directory`` is unset."""
    return state_dir() / "batches"


class SqliteBatchStore:
    """Files on disk, batches, results and leases in SQLite; calls run on a thread."""

    def __init__(self, settings: Batches) -> None:
        self.directory = settings.directory or default_directory()
        self.ttl = settings.file_ttl
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0

    # The connection, the blobs, the one boundary where failures are translated.

    def _open(self) -> sqlite3.Connection:
        if self._db is not None and self._pid == os.getpid():
            return self._db
        (self.directory / "files").mkdir(mode=0o700, parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.directory / FILE,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT,
            isolation_level=None,  # transactions are begun explicitly (BEGIN IMMEDIATE)
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # A result is the one thing that must survive a crash: each commit is synced.
            db.execute("PRAGMA synchronous=FULL")
            for statement in _SCHEMA:
                db.execute(statement)
        except sqlite3.Error:
            db.close()
            raise
        self._db, self._pid = db, os.getpid()
        return db

    def _blob(self, name: str) -> Path:
        return self.directory / "files" / name

    def _write_blob(self, name: str, content: bytes) -> None:
        path = self._blob(name)
        temporary = path.with_name(f".{name}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise

    def _unlink(self, *names: str) -> None:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                self._blob(name).unlink()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one transaction on the store's thread; failures are StoreUnavailable."""

        def run() -> T:
            with self._lock:
                db = self._open()
                db.execute("BEGIN IMMEDIATE")
                try:
                    result = work(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return result

        try:
            return await asyncio.to_thread(run)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(
                f"The batch store ({self.directory}) failed: {exc}.", code="store_unavailable"
            ) from exc

    # Files.

    async def put_file(self, record: FileRecord, content: bytes) -> None:
        def work(db: sqlite3.Connection) -> None:
            self._write_blob(record.id, content)
            try:
                db.execute(
                    "INSERT OR REPLACE INTO files (id, owner, created, expires, data) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (record.id, record.owner, record.created_at, record.expires_at, record.dumps()),
                )
            except sqlite3.Error:
                self._unlink(record.id)
                raise

        await self._run(work)

    async def get_file(self, file_id: str, owner: str) -> FileRecord | None:
        def work(db: sqlite3.Connection) -> FileRecord | None:
            row = db.execute(
                "SELECT data FROM files WHERE id = ? AND owner = ? AND "
                "(expires IS NULL OR expires > ?)",
                (file_id, owner, time.time()),
            ).fetchone()
            return FileRecord.loads(row[0]) if row else None

        return await self._run(work)

    async def list_files(self, owner: str) -> list[FileRecord]:
        def work(db: sqlite3.Connection) -> list[FileRecord]:
            rows = db.execute(
                "SELECT data FROM files WHERE owner = ? AND (expires IS NULL OR expires > ?) "
                "ORDER BY created, rowid",
                (owner, time.time()),
            ).fetchall()
            return [FileRecord.loads(row[0]) for row in rows]

        return await self._run(work)

    async def read_file(self, file_id: str, owner: str) -> bytes | None:
        if await self.get_file(file_id, owner) is None:
            return None
        return await self._run(lambda db: self._blob(file_id).read_bytes())

    async def delete_file(self, file_id: str, owner: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            gone = db.execute(
                "DELETE FROM files WHERE id = ? AND owner = ? RETURNING id", (file_id, owner)
            ).fetchall()
            if gone:
                self._unlink(file_id)
            return bool(gone)

        return await self._run(work)

    # Batches.

    async def put_batch(self, doc: dict[str, Any], content: bytes) -> None:
        batch = doc["batch"]

        def work(db: sqlite3.Connection) -> None:
            name = batch["id"] + ".input"
            source = self._blob(batch["input_file_id"])
            try:
                os.link(source, self._blob(name))
            except FileExistsError:
                pass
            except OSError:  # another filesystem, or no hard links: a copy
                self._write_blob(name, content)
            db.execute(
                "INSERT INTO batches (id, owner, created, status, expires, data) "
                "VALUES (?, ?, ?, ?, NULL, ?)",
                (batch["id"], doc["owner"], batch["created_at"], batch["status"], _dump(doc)),
            )

        await self._run(work)

    async def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        def work(db: sqlite3.Connection) -> dict[str, Any] | None:
            row = db.execute("SELECT data FROM batches WHERE id = ?", (batch_id,)).fetchone()
            return _load(row[0]) if row else None

        return await self._run(work)

    async def list_batches(self, owner: str | None) -> list[dict[str, Any]]:
        def work(db: sqlite3.Connection) -> list[dict[str, Any]]:
            if owner is None:
                rows = db.execute("SELECT data FROM batches ORDER BY created, rowid")
            else:
                rows = db.execute(
                    "SELECT data FROM batches WHERE owner = ? ORDER BY created, rowid", (owner,)
                )
            return [_load(row[0]) for row in rows.fetchall()]

        return await self._run(work)

    async def update_batch(self, batch_id: str, change: Change) -> dict[str, Any] | None:
        def work(db: sqlite3.Connection) -> dict[str, Any] | None:
            row = db.execute("SELECT data FROM batches WHERE id = ?", (batch_id,)).fetchone()
            if row is None:
                return None
            doc = _load(row[0])
            changed = change(doc)
            if changed is None:
                return doc
            status = changed["batch"]["status"]
            expires = time.time() + self.ttl if status in FINAL else None
            db.execute(
                "UPDATE batches SET status = ?, expires = ?, data = ? WHERE id = ?",
                (status, expires, _dump(changed), batch_id),
            )
            if status in FINAL:
                db.execute("DELETE FROM leases WHERE batch = ?", (batch_id,))
                self._unlink(batch_id + ".input")
            return changed

        return await self._run(work)

    async def batch_input(self, batch_id: str) -> bytes | None:
        def work(db: sqlite3.Connection) -> bytes | None:
            try:
                return self._blob(batch_id + ".input").read_bytes()
            except FileNotFoundError:
                return None

        return await self._run(work)

    async def unfinished(self) -> list[tuple[str, str]]:
        if not (self.directory / FILE).exists():
            return []  # nothing was ever kept here: no file made to say so

        def work(db: sqlite3.Connection) -> list[tuple[str, str]]:
            marks = ", ".join("?" * len(FINAL))
            rows = db.execute(
                f"SELECT id, status FROM batches WHERE status NOT IN ({marks}) ORDER BY created",
                FINAL,
            )
            return [(row[0], row[1]) for row in rows.fetchall()]

        return await self._run(work)

    # Results and leases.

    async def acquire(self, batch_id: str, holder: str, seconds: float) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            now = time.time()
            taken = db.execute(
                "INSERT INTO leases (batch, holder, expires) VALUES (?, ?, ?) "
                "ON CONFLICT (batch) DO UPDATE SET holder = excluded.holder, "
                "expires = excluded.expires WHERE leases.holder = excluded.holder "
                "OR leases.expires <= ? RETURNING holder",
                (batch_id, holder, now + seconds, now),
            ).fetchall()
            return bool(taken)

        return await self._run(work)

    async def holds(self, batch_id: str, holder: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT holder FROM leases WHERE batch = ?", (batch_id,)).fetchone()
            return row is not None and row[0] == holder

        return await self._run(work)

    async def release(self, batch_id: str, holder: str) -> None:
        await self._run(
            lambda db: db.execute(
                "DELETE FROM leases WHERE batch = ? AND holder = ?", (batch_id, holder)
            )
        )

    async def record(
        self, batch_id: str, holder: str, line: int, failed: bool, data: bytes
    ) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT holder FROM leases WHERE batch = ?", (batch_id,)).fetchone()
            if row is None or row[0] != holder:
                return False
            kept = db.execute(
                "INSERT OR IGNORE INTO results (batch, line, failed, data) VALUES (?, ?, ?, ?)",
                (batch_id, line, int(failed), data),
            )
            return kept.rowcount == 1

        return await self._run(work)

    async def results(self, batch_id: str) -> list[tuple[int, bool, bytes]]:
        def work(db: sqlite3.Connection) -> list[tuple[int, bool, bytes]]:
            rows = db.execute(
                "SELECT line, failed, data FROM results WHERE batch = ? ORDER BY line", (batch_id,)
            )
            return [(line, bool(failed), bytes(data)) for line, failed, data in rows.fetchall()]

        return await self._run(work)

    async def counts(self, batch_id: str) -> tuple[int, int]:
        def work(db: sqlite3.Connection) -> tuple[int, int]:
            rows = dict(
                db.execute(
                    "SELECT failed, COUNT(*) FROM results WHERE batch = ? GROUP BY failed",
                    (batch_id,),
                ).fetchall()
            )
            return rows.get(0, 0), rows.get(1, 0)

        return await self._run(work)

    async def drop_results(self, batch_id: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM results WHERE batch = ?", (batch_id,)))

    async def sweep(self, now: float) -> int:
        if not (self.directory / FILE).exists():
            return 0

        def work(db: sqlite3.Connection) -> int:
            files = db.execute(
                "DELETE FROM files WHERE expires IS NOT NULL AND expires <= ? RETURNING id", (now,)
            ).fetchall()
            self._unlink(*(row[0] for row in files))
            batches = db.execute(
                "DELETE FROM batches WHERE expires IS NOT NULL AND expires <= ? RETURNING id",
                (now,),
            ).fetchall()
            for (batch_id,) in batches:
                db.execute("DELETE FROM results WHERE batch = ?", (batch_id,))
            return len(files) + len(batches)

        return await self._run(work)

    async def aclose(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None


def _dump(doc: dict[str, Any]) -> bytes:
    return orjson.dumps(doc)


def _load(data: bytes | str) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(data)
    return value
