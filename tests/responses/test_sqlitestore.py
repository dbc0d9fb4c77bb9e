"""The SQLite store, the default: its file in the state directory (made private), opened
in the worker that serves, expired rows swept on writes a few at a time, and a file that
cannot be made or written a 503 ``store_unavailable`` at once, never a hang."""

from __future__ import annotations

import sqlite3
import stat
import time
from pathlib import Path

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.errors import StoreUnavailable
from gateway.private import state_dir
from gateway.responses import sqlitestore
from gateway.responses.sqlitestore import SqliteStore, default_path
from gateway.responses.store import StoredResponse
from tests.support.bodies import CHAT, chat, completion
from tests.support.gateways import MockEngine, asgi_client
from tests.support.responses import RESPONSES, responses_request, store_settings

pytestmark = pytest.mark.anyio


def record(response_id: str, data: str = "") -> StoredResponse:
    return StoredResponse("a", {"id": response_id, "output": [], "data": data}, [], [])


def test_the_state_directory_follows_xdg() -> None:
    assert state_dir({"XDG_STATE_HOME": "/s", "HOME": "/h"}) == Path("/s/ft-gateway")
    assert state_dir({"HOME": "/h"}) == Path("/h/.local/state/ft-gateway")
    # A relative XDG_STATE_HOME is invalid by the spec: ignored.
    assert state_dir({"XDG_STATE_HOME": "rel", "HOME": "/h"}) == Path("/h/.local/state/ft-gateway")
    assert default_path({"HOME": "/h"}).name == "responses.sqlite3"


async def test_the_default_file_is_made_private_on_first_use(state_home: str) -> None:
    store = SqliteStore(None, 60)
    directory = Path(state_home) / "ft-gateway"
    assert not directory.exists()  # nothing until a response is kept
    try:
        await store.put(record("resp_1"))
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert await store.get("resp_1", "a") is not None
    finally:
        await store.aclose()


async def test_a_write_sweeps_a_bounded_number_of_expired_rows(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    store = SqliteStore(path, 60)
    try:
        await store.put(record("resp_live"))
        db = sqlite3.connect(path)
        past = time.time() - 1
        rows = [(f"resp_{i}", "a", past, b"{}") for i in range(sqlitestore.SWEEP + 5)]
        db.executemany("INSERT INTO responses VALUES (?, ?, ?, ?)", rows)
        db.commit()
        await store.put(record("resp_new"))
        (left,) = db.execute(
            "SELECT count(*) FROM responses WHERE expires <= ?", (past,)
        ).fetchone()
        assert left == 5
        await store.put(record("resp_newer"))
        (left,) = db.execute(
            "SELECT count(*) FROM responses WHERE expires <= ?", (past,)
        ).fetchone()
        assert left == 0
        db.close()
        assert await store.get("resp_live", "a") is not None
    finally:
        await store.aclose()


async def test_a_full_file_is_store_unavailable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "r.sqlite3", 60)
    try:
        await store.put(record("resp_1"))
        db = store._open()
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from here on
        with pytest.raises(StoreUnavailable) as caught:
            await store.put(record("resp_2", "x" * 100_000))
        assert "full" in str(caught.value.__cause__)  # (the log's detail; not the client's)
        assert await store.get("resp_1", "a") is not None  # what was kept stays readable
    finally:
        await store.aclose()


@pytest.mark.parametrize("where", ["under a file", "on a read-only filesystem"])
async def test_a_store_that_cannot_be_made_is_a_503_and_chat_still_works(
    tmp_path: Path, where: str
) -> None:
    if where == "under a file":
        blocker = tmp_path / "not-a-directory"
        blocker.write_text("")
        path = blocker / "responses.sqlite3"
    else:
        # procfs takes no new files, whoever asks (the tests may run as root, whom
        # file modes do not stop).
        path = Path("/proc") / "ft-gateway-responses.sqlite3"
    engine = MockEngine(lambda request: httpx.Response(200, json=completion("ok")))
    app = create_app(store_settings(backend="sqlite", path=str(path)), transport=engine.transport)
    async with asgi_client(app) as client:
        answer = await client.post(RESPONSES, json=responses_request())
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "store_unavailable"
        assert str(path) not in error["message"]  # the path is the log's (SECURITY.md)
        assert (await client.post(CHAT, json=chat())).status_code == 200
