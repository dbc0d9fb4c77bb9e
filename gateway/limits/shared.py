"""The counters shared by the worker processes of one ``serve --workers N``.

No server: a file in the directory the supervisor makes for its workers,
mapped into every worker's memory (``mmap``, MAP_SHARED), and an exclusive
``flock`` on it around each decision, so one decision at a time across the
workers sees and changes a key's state: the same GCRA as one process, exact.
The lock is held for a few microseconds and no ``await`` happens under it.

The file is a table of slots found by the hash of the key (open addressing).
A slot holds the key's digest, its three TATs, and one in-flight count per
worker *index* (the supervisor gives a restarted worker the index of the one
it replaces): the concurrency is their sum, and a worker starting zeroes its
own column, so the requests of a worker that died are not counted forever.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
import time
from pathlib import Path

from gateway.limits.gcra import Limit, Verdict, acquire, release

MAX_WORKERS = 256
SLOTS = 4096
_HEAD = struct.Struct("<16s3d")  # digest, TAT requests/min, tokens/min, tokens/day
_COUNTS = struct.Struct(f"<{MAX_WORKERS}i")
_SLOT = _HEAD.size + _COUNTS.size
_EMPTY = bytes(16)
FILE_NAME = "rate-limits.shm"


class TableFull(RuntimeError):
    """More keys than the table has slots."""


class SharedStore:
    """Every key's state in a file mapped by all the workers of one machine."""

    kind = "local"

    def __init__(self, directory: Path, *, worker_index: int, slots: int = SLOTS) -> None:
        if not 0 <= worker_index < MAX_WORKERS:
            raise ValueError(f"worker index {worker_index} is not below {MAX_WORKERS}")
        self.index = worker_index
        self.slots = slots
        self._slot_of: dict[str, int] = {}
        size = slots * _SLOT
        self._fd = os.open(directory / FILE_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if os.fstat(self._fd).st_size < size:
                os.ftruncate(self._fd, size)
            self._map = mmap.mmap(self._fd, size)
            self._clear_column()
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _clear_column(self) -> None:
        offset = _HEAD.size + 4 * self.index
        for slot in range(self.slots):
            base = slot * _SLOT
            if self._map[base : base + 16] != _EMPTY:
                struct.pack_into("<i", self._map, base + offset, 0)

    def _find(self, bucket: str) -> int:
        """The slot of ``bucket`` (claimed if new); called under the lock."""
        known = self._slot_of.get(bucket)
        if known is not None:
            return known
        digest = hashlib.blake2b(bucket.encode(), digest_size=16).digest()
        start = int.from_bytes(digest[:8], "little") % self.slots
        for step in range(self.slots):
            slot = (start + step) % self.slots
            base = slot * _SLOT
            held = self._map[base : base + 16]
            if held == digest or held == _EMPTY:
                if held == _EMPTY:
                    self._map[base : base + 16] = digest
                self._slot_of[bucket] = slot
                return slot
        raise TableFull(f"the shared rate-limit table is full ({self.slots} keys)")

    def _read(self, base: int) -> list[float]:
        _, r, t, d = _HEAD.unpack_from(self._map, base)
        return [r, t, d, float(sum(_COUNTS.unpack_from(self._map, base + _HEAD.size)))]

    def _write(self, base: int, state: list[float], own: int) -> None:
        struct.pack_into("<3d", self._map, base + 16, state[0], state[1], state[2])
        struct.pack_into("<i", self._map, base + _HEAD.size + 4 * self.index, own)

    def _own(self, base: int) -> int:
        value: int = struct.unpack_from("<i", self._map, base + _HEAD.size + 4 * self.index)[0]
        return value

    async def acquire(self, bucket: str, limit: Limit, tokens: int) -> tuple[Verdict, str]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            base = self._find(bucket) * _SLOT
            state = self._read(base)
            verdict = acquire(state, limit, time.time(), tokens)
            if verdict.allowed:
                self._write(base, state, self._own(base) + 1)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        return verdict, ""

    async def release(
        self, bucket: str, limit: Limit, *, reserved: int, used: int, lease: str
    ) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            base = self._find(bucket) * _SLOT
            state = self._read(base)
            release(state, limit, time.time(), reserved=reserved, used=used)
            self._write(base, state, max(self._own(base) - 1, 0))
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    async def aclose(self) -> None:
        self._map.close()
        os.close(self._fd)
