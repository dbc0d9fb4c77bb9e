"""The response store against a client that fills it and a user who reads it (issue 33,
item 7).

A stored response kept ``metadata`` up to the body limit with no bound on a key's
share (7 MB a request, kept 30 days, for a few tokens), and an explicit
``store.path`` made the SQLite file and its ``-wal``/``-shm`` world-readable. Now
metadata has OpenAI's bounds, each key's stored bytes are counted against
``store.max_bytes_per_key``, and the files are 0600 (a missing directory 0700)
wherever they are.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.errors import StoreUnavailable
from gateway.responses.sqlitestore import SqliteStore
from gateway.responses.store import StoredResponse
from tests.support.bodies import completion
from tests.support.gateways import MockEngine, asgi_client
from tests.support.redisserver import RedisServer
from tests.support.responses import RESPONSES, responses_request, store_settings

pytestmark = pytest.mark.anyio


def _engine() -> MockEngine:
    return MockEngine(lambda request: httpx.Response(200, json=completion("ok")))


@pytest.mark.parametrize(
    ("metadata", "param", "code"),
    [
        ({f"k{i}": "v" for i in range(17)}, "metadata", "object_above_max_properties"),
        ({"k" * 65: "v"}, "metadata", "string_above_max_length"),
        ({"k": "v" * 513}, "metadata.k", "string_above_max_length"),
        ({"k": "v" * 7_000_000}, "metadata.k", "string_above_max_length"),
        ({"k": 1}, "metadata.k", "invalid_type"),
        (["k"], "metadata", "invalid_type"),
    ],
)
async def test_metadata_has_openais_bounds(metadata: Any, param: str, code: str) -> None:
    engine = _engine()
    settings = store_settings(backend="memory")
    settings.limits.max_body_bytes = 16 * 1024 * 1024
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        answer = await client.post(RESPONSES, json=responses_request(metadata=metadata))
        within = {f"k{i}": "v" * 512 for i in range(16)}
        kept = await client.post(RESPONSES, json=responses_request(metadata=within))
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, code)
    assert kept.status_code == 200 and kept.json()["metadata"] == within
    assert len(engine.requests) == 1  # the refused one never reached the engine


def _backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    if name == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        return {"backend": "redis", "url": redis.url}
    if name == "sqlite":
        return {"backend": "sqlite", "path": str(tmp_path / "store" / "r.sqlite3")}
    return {"backend": "memory"}


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
async def test_a_keys_stored_bytes_are_bounded_and_freed_by_deletes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    engine = _engine()
    store = _backend(backend, tmp_path, request)
    settings = store_settings(**store, max_bytes_per_key=8000)
    big = "x" * 1500  # each stored response holds its input: about 2 KB
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        answers = [
            await client.post(RESPONSES, json=responses_request(input=big)) for _ in range(6)
        ]
        statuses = [a.status_code for a in answers]
        kept = [a.json()["id"] for a in answers if a.status_code == 200]
        unstored = await client.post(RESPONSES, json=responses_request(input=big, store=False))
        for response_id in kept[:2]:
            assert (await client.delete(f"{RESPONSES}/{response_id}")).status_code == 200
        again = await client.post(RESPONSES, json=responses_request(input=big))
    assert statuses[:3] == [200, 200, 200] and 429 in statuses
    refused = answers[statuses.index(429)]
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota")
    assert "of 8000 bytes" in error["message"] and "'store': false" in error["message"]
    assert refused.headers["x-should-retry"] == "false"  # openai-python does not retry it
    assert unstored.status_code == 200  # store: false keeps nothing, so it always passes
    assert again.status_code == 200  # the deleted ones no longer count
    # Each refused request stopped before the engine.
    assert len(engine.requests) == len(kept) + 2


async def test_an_explicit_store_path_is_private_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "r.sqlite3"
    old = os.umask(0o022)
    try:
        store = SqliteStore(path, 60)
        try:
            await store.put(StoredResponse("a", {"id": "resp_1", "output": []}, [], []))
            files = [Path(f"{path}{s}") for s in ("", "-wal", "-shm")]
            assert [stat.S_IMODE(f.stat().st_mode) for f in files] == [0o600] * 3
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        finally:
            await store.aclose()
    finally:
        os.umask(old)


async def test_an_older_world_readable_store_is_narrowed_and_a_link_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.sqlite3"
    for suffix in ("", "-wal"):
        Path(f"{path}{suffix}").write_bytes(b"")
        os.chmod(f"{path}{suffix}", 0o644)
    store = SqliteStore(path, 60)
    try:
        await store.put(StoredResponse("a", {"id": "resp_1", "output": []}, [], []))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(f"{path}-wal").stat().st_mode) == 0o600
    finally:
        await store.aclose()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    linked = tmp_path / "linked.sqlite3"
    linked.symlink_to(victim)
    store = SqliteStore(linked, 60)
    try:
        # The client is told the store is unavailable; the cause (in the log) says why.
        with pytest.raises(StoreUnavailable) as refused:
            await store.put(StoredResponse("a", {"id": "resp_2", "output": []}, [], []))
        assert "symbolic link" in str(refused.value.__cause__)
    finally:
        await store.aclose()
    assert victim.read_bytes() == b"precious"


async def test_a_file_of_an_older_gateway_counts_its_responses_once(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE responses (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
        "expires REAL NOT NULL, data BLOB NOT NULL)"
    )
    later = time.time() + 60
    db.execute("INSERT INTO responses VALUES ('r1', 'a', ?, ?)", (later, b"x" * 100))
    db.execute("INSERT INTO responses VALUES ('r2', 'a', ?, ?)", (later - 120, b"x" * 50))
    db.commit()
    db.close()
    store = SqliteStore(path, 60)
    try:
        assert await store.held("a") == 100  # the expired one is not counted
        second = SqliteStore(path, 60)  # another worker opening the same file
        try:
            assert await second.held("a") == 100
        finally:
            await second.aclose()
    finally:
        await store.aclose()
