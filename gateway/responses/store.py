"""The response store: what ``previous_response_id`` and GET/DELETE /v1/responses read.

A stored response is one JSON record: its owner (who may read it), the
``response`` object, this request's input items, and the items of the
conversation before it. Backends, chosen by ``store.backend``: sqlite (the
default; sqlitestore.py: a file, every worker of one host), redis
(redisstore.py: every worker and pod), memory (one process). Each keeps
records ``store.ttl`` seconds. A record is visible only to its owner; to anyone
else it does not exist (404, as OpenAI answers for an unknown id). Backend
failures are StoreUnavailable (``unavailable``): the client learns that the store
is unavailable and nothing else (no file path, no address, no library's error
text), the gateway's log says where and why.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.errors import StoreUnavailable
from gateway.settings import Store

logger = logging.getLogger("gateway.store")
UNAVAILABLE = "The response store is unavailable; try again later."


def unavailable(backend: str, exc: BaseException, **where: str) -> StoreUnavailable:
    """The error a client gets for a failure of the store, once its detail (``where``:
    the file, ...; the exception) is in the log."""
    logger.warning(
        "the response store failed",
        extra={"event": "store_failed", "backend": backend, **where, "error": repr(exc)},
    )
    return StoreUnavailable(UNAVAILABLE)


@dataclass(slots=True)
class StoredResponse:
    """One stored response and the conversation that led to it."""

    owner: str
    response: dict[str, Any]
    input: list[dict[str, Any]]
    history: list[dict[str, Any]]

    def dumps(self) -> bytes:
        return orjson.dumps(
            {
                "owner": self.owner,
                "response": self.response,
                "input": self.input,
                "history": self.history,
            }
        )

    @classmethod
    def loads(cls, data: bytes) -> StoredResponse:
        value = orjson.loads(data)
        return cls(value["owner"], value["response"], value["input"], value["history"])

    def conversation(self) -> list[dict[str, Any]]:
        """The items a response continuing this one starts from: history, input, output."""
        return [*self.history, *self.input, *self.response.get("output", ())]


def owner_of(client: str | None, authorization: bytes | None) -> str:
    """Who may read a response: the API key's name when keys are on, else a digest of
    the bearer credential the client sent (so two keys never see each other's)."""
    if client is not None:
        return f"key:{client}"
    return "token:" + hashlib.sha256(authorization or b"").hexdigest()


class ResponseStore(Protocol):
    """Where responses are kept; ``put`` returns the bytes its owner now keeps there,
    ``held`` those of an owner (its expired records no longer counted)."""

    async def put(self, record: StoredResponse) -> int: ...

    async def held(self, owner: str) -> int: ...

    async def get(self, response_id: str, owner: str) -> StoredResponse | None: ...

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def aclose(self) -> None: ...


def visible(data: bytes | None, owner: str) -> StoredResponse | None:
    """The record in ``data`` if ``owner`` may see it."""
    if data is None:
        return None
    record = StoredResponse.loads(data)
    return record if record.owner == owner else None


class MemoryStore:
    """A dict in this process (tests, one worker): gone when the process ends."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._records: dict[str, tuple[float, bytes]] = {}
        self._owners: dict[str, dict[str, tuple[float, int]]] = {}  # id -> (expiry, size)
        self._puts = 0

    async def put(self, record: StoredResponse) -> int:
        now = time.monotonic()
        self._puts += 1
        if self._puts % 256 == 0:
            self._records = {k: v for k, v in self._records.items() if v[0] > now}
        data = record.dumps()
        self._records[record.response["id"]] = (now + self.ttl, data)
        self._owners.setdefault(record.owner, {})[record.response["id"]] = (
            now + self.ttl,
            len(data),
        )
        return await self.held(record.owner)

    async def held(self, owner: str) -> int:
        now = time.monotonic()
        kept = {k: v for k, v in self._owners.get(owner, {}).items() if v[0] > now}
        if kept:
            self._owners[owner] = kept
        else:
            self._owners.pop(owner, None)
        return sum(size for _, size in kept.values())

    def _data(self, response_id: str) -> bytes | None:
        entry = self._records.get(response_id)
        if entry is None or entry[0] <= time.monotonic():
            return None
        return entry[1]

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        return visible(self._data(response_id), owner)

    async def delete(self, response_id: str, owner: str) -> bool:
        if visible(self._data(response_id), owner) is None:
            return False
        del self._records[response_id]
        self._owners.get(owner, {}).pop(response_id, None)
        return True

    async def aclose(self) -> None:
        self._records.clear()
        self._owners.clear()


def make_store(settings: Store) -> ResponseStore | None:
    """The backend ``store.backend`` names (None for none); Redis's module is imported
    only when chosen."""
    if settings.backend == "memory":
        return MemoryStore(settings.ttl)
    if settings.backend == "sqlite":
        sqlite: ResponseStore = importlib.import_module(
            "gateway.responses.sqlitestore"
        ).SqliteStore(settings.path, settings.ttl)
        return sqlite
    if settings.backend == "redis":
        module = importlib.import_module("gateway.responses.redisstore")
        store: ResponseStore = module.RedisStore(
            settings.url, ttl=settings.ttl, prefix=settings.key_prefix
        )
        return store
    return None
