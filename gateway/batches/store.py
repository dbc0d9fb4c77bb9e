"""Where files and batches are kept: the records, the store's protocol, the backend chooser.

A store keeps four things. **Files**: the File object's metadata and its bytes
(uploads, and the output and error files a batch writes). **Batches**: one JSON
document each (the Batch object, and whose it is). **Results**: each line's
answer once it is final, recorded once (a second record of the same line is
refused) and only by the runner that holds the batch's **lease** (a lease that
expires unless renewed, so a dead runner's batch is taken over). Counts of
results are what ``request_counts`` shows: a line is counted only once its
result is kept. Backends: sqlite (sqlitestore.py: bytes on disk, the rest in a
SQLite file; every worker of one host) and redis (redisstore.py: every worker
and pod). Every failure of a backend is StoreUnavailable.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import orjson

from gateway.settings import Batches

# A batch document's statuses: those a runner still has work in, and the final ones.
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
FINAL = ("failed", "completed", "expired", "cancelled")
Blob = bytes  # (``bytes`` is also a field of FileRecord)
Change = Callable[[dict[str, Any]], dict[str, Any] | None]


def new_id(prefix: str) -> str:
    """An object id as OpenAI spells them (``file-...``, ``batch_...``, ``batch_req_...``)."""
    return prefix + secrets.token_hex(12)


@dataclass(slots=True)
class FileRecord:
    """One file: the File object's fields and its owner (the bytes are kept beside)."""

    id: str
    owner: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    expires_at: int | None

    def api(self) -> dict[str, Any]:
        """The File object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }

    def dumps(self) -> Blob:
        return orjson.dumps(asdict(self))

    @classmethod
    def loads(cls, data: Blob | str) -> FileRecord:
        return cls(**orjson.loads(data))


class BatchStore(Protocol):
    """Files, batches, their lines' results and the runners' leases."""

    # Files.
    async def put_file(self, record: FileRecord, content: bytes) -> None: ...

    async def get_file(self, file_id: str, owner: str) -> FileRecord | None: ...

    async def list_files(self, owner: str) -> list[FileRecord]: ...

    async def read_file(self, file_id: str, owner: str) -> bytes | None: ...

    async def delete_file(self, file_id: str, owner: str) -> bool: ...

    # Batches: ``doc`` is {"batch": <the Batch object>, "owner", "client", "profile", ...}.
    async def put_batch(self, doc: dict[str, Any], content: bytes) -> None:
        """A new batch, with its own copy of the input file's bytes."""
        ...

    async def get_batch(self, batch_id: str) -> dict[str, Any] | None: ...

    async def list_batches(self, owner: str | None) -> list[dict[str, Any]]:
        """An owner's batches (None: everyone's), oldest first."""
        ...

    async def update_batch(self, batch_id: str, change: Change) -> dict[str, Any] | None:
        """``change`` applied to the stored document at once (None from it: no change);
        the document as it is after."""
        ...

    async def batch_input(self, batch_id: str) -> bytes | None: ...

    async def unfinished(self) -> list[tuple[str, str]]:
        """(id, status) of the batches in a status a runner still has work in."""
        ...

    # Results and leases.
    async def acquire(self, batch_id: str, holder: str, seconds: float) -> bool:
        """Hold (or keep holding) the batch's lease for ``seconds`` more; False if another
        runner holds it."""
        ...

    async def holds(self, batch_id: str, holder: str) -> bool:
        """Whether ``holder`` holds the batch's lease."""
        ...

    async def release(self, batch_id: str, holder: str) -> None: ...

    async def record(
        self, batch_id: str, holder: str, line: int, failed: bool, data: bytes
    ) -> bool:
        """Keep a line's final answer once: False if ``holder`` has lost the lease or the
        line has a result already (nothing is written then)."""
        ...

    async def results(self, batch_id: str) -> list[tuple[int, bool, bytes]]:
        """The recorded lines (line number, failed, the output line), in line order."""
        ...

    async def counts(self, batch_id: str) -> tuple[int, int]:
        """Lines recorded (completed, failed)."""
        ...

    async def drop_results(self, batch_id: str) -> None: ...

    async def sweep(self, now: float) -> int:
        """Remove files past their expiry and final batches past theirs; how many."""
        ...

    async def aclose(self) -> None: ...


BACKENDS = {
    "sqlite": "gateway.batches.sqlitestore:SqliteBatchStore",
    "redis": "gateway.batches.redisstore:RedisBatchStore",
}


def make_batch_store(settings: Batches) -> BatchStore:
    """The backend ``batches.backend`` names; only its module is imported."""
    module, _, name = BACKENDS[settings.backend].partition(":")
    store: BatchStore = getattr(importlib.import_module(module), name)(settings)
    return store
