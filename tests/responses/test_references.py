"""Item ids that name their response, and ``item_reference`` resolution on its own (the
memory store: every backend answers the same ``get``)."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequest
from gateway.responses.references import item_ids, resolve_references, response_of
from gateway.responses.store import MemoryStore, StoredResponse
from gateway.responses.translate import new_id

pytestmark = pytest.mark.anyio


def test_an_item_id_names_its_response() -> None:
    response_id = new_id("resp")
    ids = item_ids(response_id)
    made = [ids("msg"), ids("fc"), ids("rs")]
    assert len(set(made)) == 3
    assert all(response_of(item) == response_id for item in made)
    assert response_of("msg_123") is None  # a client's own id (Copilot Chat's msg_123)
    assert response_of(response_id) is None  # a response id is no item id
    assert response_of("msg_" + "g" * 52) is None


async def test_references_resolve_for_their_owner_only() -> None:
    store = MemoryStore(60)
    response_id = new_id("resp")
    ids = item_ids(response_id)
    said = {"id": ids("msg"), "type": "message", "role": "assistant", "content": "Tom."}
    asked = {"id": ids("msg"), "type": "message", "role": "user", "content": "Name a cat."}
    await store.put(StoredResponse("a", {"id": response_id, "output": [said]}, [asked], []))
    items = [
        {"type": "item_reference", "id": asked["id"]},
        {"type": "item_reference", "id": said["id"]},
    ]
    assert await resolve_references(store, items, "a") == [asked, said]
    with pytest.raises(InvalidRequest) as other:
        await resolve_references(store, items, "b")
    assert other.value.param == "input[0].id"
    plain = [{"type": "message", "role": "user", "content": "hi"}]
    assert await resolve_references(None, plain, "a") is plain  # nothing to resolve
    with pytest.raises(InvalidRequest) as missing:
        await resolve_references(store, [{"type": "item_reference"}], "a")
    assert missing.value.code == "missing_required_parameter"
