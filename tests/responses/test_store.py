"""The response store: each backend on its own (memory, a SQLite file, a real Redis), then
through the gateway: previous_response_id, GET/DELETE /v1/responses/{id}, input_items, one
API key's responses invisible to another, store: false, and a Redis that is gone."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.access.keys import hash_key
from gateway.app.factory import create_app
from gateway.responses.redisstore import RedisStore
from gateway.responses.sqlitestore import SqliteStore
from gateway.responses.store import MemoryStore, ResponseStore, StoredResponse
from tests.support.bodies import MODEL, completion
from tests.support.gateways import MockEngine, asgi_client
from tests.support.redisserver import RedisServer
from tests.support.responses import RESPONSES, responses_request, store_settings

pytestmark = pytest.mark.anyio
ALICE = {"authorization": "Bearer sk-alice"}
BOB = {"authorization": "Bearer sk-bob"}


def record(response_id: str = "resp_1", owner: str = "a") -> StoredResponse:
    return StoredResponse(owner, {"id": response_id, "output": [{"x": 1}]}, [{"y": 2}], [{"z": 3}])


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ResponseStore, Any]]:
    """A backend, and a function that makes another with a short ttl."""
    kind = request.param
    server: RedisServer | None = None
    if kind == "redis":
        server = request.getfixturevalue("redis_server")

    def make(ttl: float) -> ResponseStore:
        if kind == "memory":
            return MemoryStore(ttl)
        if kind == "sqlite":
            return SqliteStore(tmp_path / "r.sqlite3", ttl)
        assert server is not None
        return RedisStore(server.url, ttl=ttl, prefix="t:")

    backend = make(60)
    yield backend, make
    await backend.aclose()


async def test_a_record_is_kept_for_its_owner_only(store: tuple[ResponseStore, Any]) -> None:
    backend, _ = store
    await backend.put(record())
    got = await backend.get("resp_1", "a")
    assert got == record()
    assert got.conversation() == [{"z": 3}, {"y": 2}, {"x": 1}]
    assert await backend.get("resp_1", "b") is None
    assert await backend.get("resp_2", "a") is None
    assert not await backend.delete("resp_1", "b")
    assert await backend.get("resp_1", "a") is not None
    assert await backend.delete("resp_1", "a")
    assert await backend.get("resp_1", "a") is None
    assert not await backend.delete("resp_1", "a")


async def test_records_expire_after_the_ttl(store: tuple[ResponseStore, Any]) -> None:
    _, make = store
    short = make(0.05)
    try:
        await short.put(record("resp_short"))
        deadline = time.monotonic() + 10
        while await short.get("resp_short", "a") is not None:
            assert time.monotonic() < deadline, "the record did not expire"
        assert not await short.delete("resp_short", "a")
    finally:
        await short.aclose()


def engine_answers(*texts: str) -> MockEngine:
    answers = iter(texts)
    return MockEngine(lambda request: httpx.Response(200, json=completion(next(answers))))


async def test_previous_response_id_continues_the_conversation(tmp_path: Path) -> None:
    engine = engine_answers("Tom.", "Tom is short for Thomas.")
    app = create_app(
        store_settings(backend="sqlite", path=str(tmp_path / "s.db")), transport=engine.transport
    )
    async with asgi_client(app) as client:
        first = await client.post(
            RESPONSES,
            json=responses_request(input="Name a cat.", instructions="Be brief."),
            headers=ALICE,
        )
        assert first.status_code == 200
        one = first.json()
        assert one["store"] is True
        second = await client.post(
            RESPONSES,
            json={"model": MODEL, "input": "Why?", "previous_response_id": one["id"]},
            headers=ALICE,
        )
        assert second.status_code == 200, second.text
        two = second.json()
        assert two["previous_response_id"] == one["id"]
        # Instructions are not carried over (as OpenAI does); the turns are.
        assert json.loads(engine.requests[1].content)["messages"] == [
            {"role": "user", "content": "Name a cat."},
            {"role": "assistant", "content": "Tom."},
            {"role": "user", "content": "Why?"},
        ]
        got = await client.get(f"{RESPONSES}/{two['id']}", headers=ALICE)
        assert got.status_code == 200 and got.json() == two
        items = (await client.get(f"{RESPONSES}/{two['id']}/input_items", headers=ALICE)).json()
        assert items["object"] == "list" and items["has_more"] is False
        texts = [item["content"][0]["text"] for item in items["data"]]
        assert texts == ["Why?", "Tom.", "Name a cat."]  # newest first by default
        assert items["first_id"] == items["data"][0]["id"]
        assert items["last_id"] == items["data"][-1]["id"]
        page = (
            await client.get(
                f"{RESPONSES}/{two['id']}/input_items",
                params={"order": "asc", "limit": 1, "after": items["data"][2]["id"]},
                headers=ALICE,
            )
        ).json()
        assert [item["content"][0]["text"] for item in page["data"]] == ["Tom."]
        assert page["has_more"] is True
        for bad in ({"order": "up"}, {"limit": "0"}, {"limit": "x"}, {"after": "msg_nope"}):
            refused = await client.get(
                f"{RESPONSES}/{two['id']}/input_items", params=bad, headers=ALICE
            )
            assert refused.status_code == 400 and refused.json()["error"]["param"] in bad


async def test_another_key_sees_nothing(tmp_path: Path) -> None:
    app = create_app(store_settings(), transport=engine_answers("a", "b").transport)
    async with asgi_client(app) as client:
        made = (await client.post(RESPONSES, json=responses_request(), headers=ALICE)).json()
        where = f"{RESPONSES}/{made['id']}"
        for call in (
            client.get(where, headers=BOB),
            client.get(f"{where}/input_items", headers=BOB),
            client.delete(where, headers=BOB),
            client.get(where),
        ):
            answer = await call
            assert answer.status_code == 404
            assert answer.json()["error"]["message"] == f"No response found with id '{made['id']}'."
        continued = await client.post(
            RESPONSES, json=responses_request(previous_response_id=made["id"]), headers=BOB
        )
        assert continued.status_code == 400
        assert continued.json()["error"]["code"] == "previous_response_not_found"
        assert (await client.get(where, headers=ALICE)).status_code == 200
        deleted = await client.delete(where, headers=ALICE)
        assert deleted.json() == {"id": made["id"], "object": "response", "deleted": True}
        assert (await client.get(where, headers=ALICE)).status_code == 404


async def test_store_false_writes_nothing() -> None:
    app = create_app(store_settings(), transport=engine_answers("a").transport)
    async with asgi_client(app) as client:
        made = (await client.post(RESPONSES, json=responses_request(store=False))).json()
        assert made["store"] is False
        assert (await client.get(f"{RESPONSES}/{made['id']}")).status_code == 404
        continued = await client.post(
            RESPONSES, json=responses_request(previous_response_id=made["id"])
        )
        assert continued.json()["error"]["code"] == "previous_response_not_found"


async def test_with_no_store_the_routes_say_so(engine: MockEngine) -> None:
    app = create_app(store_settings(backend="none"), transport=engine.transport)
    async with asgi_client(app) as client:
        answer = await client.get(f"{RESPONSES}/resp_1")
        assert answer.status_code == 404
        assert "store.backend" in answer.json()["error"]["message"]
        continued = await client.post(
            RESPONSES, json=responses_request(previous_response_id="resp_1")
        )
        assert continued.status_code == 400
        error = continued.json()["error"]
        assert error["param"] == "previous_response_id"
        assert "needs a response store" in error["message"]
    assert engine.requests == []


async def test_a_redis_that_is_gone_is_a_503_never_a_forgotten_conversation(
    redis_server: RedisServer,
) -> None:
    app = create_app(
        store_settings(backend="redis", url=redis_server.url),
        transport=engine_answers("a", "b").transport,
    )
    async with asgi_client(app) as client:
        made = (await client.post(RESPONSES, json=responses_request())).json()
        redis_server.stop()
        continued = await client.post(
            RESPONSES, json=responses_request(previous_response_id=made["id"])
        )
        assert continued.status_code == 503
        assert continued.json()["error"]["code"] == "store_unavailable"
        answer = await client.post(RESPONSES, json=responses_request())
        assert answer.status_code == 503  # the answer could not be kept
        assert (await client.get(f"{RESPONSES}/{made['id']}")).status_code == 503


async def test_a_stream_whose_response_cannot_be_kept_ends_failed(
    redis_server: RedisServer,
) -> None:
    events = b"".join(
        b"data: " + json.dumps(c).encode() + b"\n\n"
        for c in (
            {"choices": [{"index": 0, "delta": {"content": "Tom"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )
    engine = MockEngine(
        lambda request: httpx.Response(
            200, content=events + b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}
        )
    )
    settings = store_settings(backend="redis", url=redis_server.url)
    async with asgi_client(create_app(settings, transport=engine.transport)) as client:
        redis_server.stop()
        answer = await client.post(RESPONSES, json=responses_request(stream=True))
    names = [line[7:] for line in answer.text.splitlines() if line.startswith("event: ")]
    assert names[-3:] == ["response.output_item.done", "error", "response.failed"]
    assert '"code":"store_unavailable"' in answer.text


async def test_with_api_keys_a_response_belongs_to_the_key_name(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(
        f"keys:\n  - {{name: alice, sha256: {hash_key('sk-alice')}}}\n"
        f"  - {{name: bob, sha256: {hash_key('sk-bob')}}}\n"
    )
    settings = store_settings()
    settings.auth.keys_file = keys
    app = create_app(settings, transport=engine_answers("a").transport)
    async with asgi_client(app) as client:
        made = (await client.post(RESPONSES, json=responses_request(), headers=ALICE)).json()
        where = f"{RESPONSES}/{made['id']}"
        assert (await client.get(where, headers=ALICE)).status_code == 200
        assert (await client.get(where, headers=BOB)).status_code == 404
        assert (await client.get(where)).status_code == 401
        assert (
            await client.get(where, headers={"authorization": "Bearer sk-eve"})
        ).status_code == 401
