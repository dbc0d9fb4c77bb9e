"""The batch store in Redis (redis.asyncio): files, batches, results and leases shared by
every worker and gateway pod, so a batch outlives the pod that ran it and one pod at a
time runs it.

Keys under ``batches.key_prefix``: ``file:ID`` (a File's metadata) and ``blob:ID``
(its bytes), both expiring with the file; ``files:OWNER`` and ``owner:OWNER``, an
owner's files and batches by creation time; ``batch:ID``, a batch's document
(expiring ``batches.file_ttl`` after it ends); ``unfinished``, the batches a runner
still has work in, with their status; ``results:ID`` and ``counts:ID``, a batch's
recorded lines and their counts; ``lease:ID``, its runner, expiring unless renewed.
A result is recorded by one script that checks the lease and that the line has none
yet; a document changes under WATCH, so a cancel and a runner's step never undo each
other. Redis errors and time-outs become StoreUnavailable here, at the one boundary.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson
import redis.asyncio as redis
from redis.exceptions import RedisError, WatchError

from gateway.batches.store import FINAL, Change, FileRecord
from gateway.errors import StoreUnavailable
from gateway.settings import Batches

T = TypeVar("T")
_TIMEOUT = 5.0  # seconds: a large file takes a while to send
_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
return 1
"""
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisBatchStore:
    """Files, batches, results and leases in Redis."""

    def __init__(self, settings: Batches) -> None:
        self.prefix = settings.key_prefix
        self.ttl = settings.file_ttl
        self._redis = redis.Redis.from_url(
            settings.url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT
        )
        self._record = self._redis.register_script(_RECORD)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._release = self._redis.register_script(_RELEASE)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def _do(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    # Files.

    async def put_file(self, record: FileRecord, content: bytes) -> None:
        pipe = self._redis.pipeline(transaction=True)
        px = None if record.expires_at is None else _ms_until(record.expires_at)
        pipe.set(self._key("blob", record.id), content, px=px)
        pipe.set(self._key("file", record.id), record.dumps(), px=px)
        pipe.zadd(self._key("files", record.owner), {record.id: record.created_at})
        await self._do(pipe.execute())

    async def get_file(self, file_id: str, owner: str) -> FileRecord | None:
        data = await self._do(self._redis.get(self._key("file", file_id)))
        if data is None:
            return None
        record = FileRecord.loads(data)
        return record if record.owner == owner else None

    async def list_files(self, owner: str) -> list[FileRecord]:
        index = self._key("files", owner)
        ids = [_text(i) for i in await self._do(self._redis.zrange(index, 0, -1))]
        if not ids:
            return []
        found = await self._do(self._redis.mget([self._key("file", i) for i in ids]))
        gone = [i for i, data in zip(ids, found, strict=True) if data is None]
        if gone:
            await self._do(self._redis.zrem(index, *gone))  # expired on their own
        return [FileRecord.loads(data) for data in found if data is not None]

    async def read_file(self, file_id: str, owner: str) -> bytes | None:
        if await self.get_file(file_id, owner) is None:
            return None
        data = await self._do(self._redis.get(self._key("blob", file_id)))
        return _bytes(data) if data is not None else None

    async def delete_file(self, file_id: str, owner: str) -> bool:
        if await self.get_file(file_id, owner) is None:
            return False
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(self._key("file", file_id), self._key("blob", file_id))
        pipe.zrem(self._key("files", owner), file_id)
        await self._do(pipe.execute())
        return True

    # Batches.

    async def put_batch(self, doc: dict[str, Any], content: bytes) -> None:
        batch = doc["batch"]
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._key("blob", batch["id"] + ".input"), content)
        pipe.set(self._key("batch", batch["id"]), orjson.dumps(doc))
        pipe.zadd(self._key("owner", doc["owner"]), {batch["id"]: batch["created_at"]})
        pipe.zadd(self._key("batches"), {batch["id"]: batch["created_at"]})
        pipe.hset(self._key("unfinished"), batch["id"], batch["status"])
        await self._do(pipe.execute())

    async def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        data = await self._do(self._redis.get(self._key("batch", batch_id)))
        return _load(data) if data is not None else None

    async def list_batches(self, owner: str | None) -> list[dict[str, Any]]:
        index = self._key("batches") if owner is None else self._key("owner", owner)
        ids = [_text(i) for i in await self._do(self._redis.zrange(index, 0, -1))]
        if not ids:
            return []
        found = await self._do(self._redis.mget([self._key("batch", i) for i in ids]))
        gone = [i for i, data in zip(ids, found, strict=True) if data is None]
        if gone:
            await self._do(self._redis.zrem(index, *gone))
        return [_load(data) for data in found if data is not None]

    async def update_batch(self, batch_id: str, change: Change) -> dict[str, Any] | None:
        key = self._key("batch", batch_id)
        while True:
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    await pipe.watch(key)
                    data = await pipe.get(key)
                    if data is None:
                        return None
                    doc = _load(data)
                    changed = change(doc)
                    if changed is None:
                        return doc
                    status = changed["batch"]["status"]
                    pipe.multi()  # type: ignore[no-untyped-call]
                    if status in FINAL:
                        pipe.set(key, orjson.dumps(changed), px=int(self.ttl * 1000))
                        pipe.hdel(self._key("unfinished"), batch_id)
                        pipe.delete(
                            self._key("lease", batch_id), self._key("blob", batch_id + ".input")
                        )
                    else:
                        pipe.set(key, orjson.dumps(changed))
                        pipe.hset(self._key("unfinished"), batch_id, status)
                    await pipe.execute()
                    return changed
            except WatchError:
                continue  # changed meanwhile (a cancel, a runner's step): read it again
            except (RedisError, OSError) as exc:
                raise _unavailable(exc) from exc

    async def batch_input(self, batch_id: str) -> bytes | None:
        data = await self._do(self._redis.get(self._key("blob", batch_id + ".input")))
        return _bytes(data) if data is not None else None

    async def unfinished(self) -> list[tuple[str, str]]:
        found = await self._do(self._redis.hgetall(self._key("unfinished")))
        return sorted((_text(k), _text(v)) for k, v in found.items())

    # Results and leases.

    async def acquire(self, batch_id: str, holder: str, seconds: float) -> bool:
        taken = await self._do(
            self._acquire(keys=[self._key("lease", batch_id)], args=[holder, int(seconds * 1000)])
        )
        return bool(taken)

    async def holds(self, batch_id: str, holder: str) -> bool:
        held = await self._do(self._redis.get(self._key("lease", batch_id)))
        return held is not None and _text(held) == holder

    async def release(self, batch_id: str, holder: str) -> None:
        await self._do(self._release(keys=[self._key("lease", batch_id)], args=[holder]))

    async def record(
        self, batch_id: str, holder: str, line: int, failed: bool, data: bytes
    ) -> bool:
        kept = await self._do(
            self._record(
                keys=[
                    self._key("lease", batch_id),
                    self._key("results", batch_id),
                    self._key("counts", batch_id),
                ],
                args=[holder, line, (b"1" if failed else b"0") + data, _KIND[failed]],
            )
        )
        return bool(kept == 1)

    async def results(self, batch_id: str) -> list[tuple[int, bool, bytes]]:
        found = await self._do(self._redis.hgetall(self._key("results", batch_id)))
        rows = [(int(k), _bytes(v)[:1] == b"1", _bytes(v)[1:]) for k, v in found.items()]
        return sorted(rows)

    async def counts(self, batch_id: str) -> tuple[int, int]:
        found = await self._do(self._redis.hgetall(self._key("counts", batch_id)))
        counts = {_text(k): int(v) for k, v in found.items()}
        return counts.get(_KIND[False], 0), counts.get(_KIND[True], 0)

    async def drop_results(self, batch_id: str) -> None:
        await self._do(
            self._redis.delete(self._key("results", batch_id), self._key("counts", batch_id))
        )

    async def sweep(self, now: float) -> int:
        # Files and ended batches expire on their own (Redis's expiry); the indexes that
        # name them are trimmed when read.
        return 0

    async def aclose(self) -> None:
        await self._redis.aclose()


_KIND = {False: "completed", True: "failed"}


def _ms_until(when: int) -> int:
    return max(1, int((when - time.time()) * 1000))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _load(data: bytes | str) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(data)
    return value


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"The batch store (Redis) is unavailable ({type(exc).__name__}: {exc}).",
        code="store_unavailable",
    )
