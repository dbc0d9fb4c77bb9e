"""``item_reference`` input items, resolved from the response store.

The ids of the items a response is made of (its output, and the input items
the gateway names) carry the id of that response: ``msg_`` + the response's 48
hex digits + a 4-digit counter. An ``item_reference`` is then one read of that
response, with the same owner check as ``previous_response_id``: another API
key's item, an expired one, one from a ``store: false`` turn (nothing kept) and
one never made are the same 400, naming ``input[i].id``. No index, so every
backend (memory, SQLite, Redis) resolves them the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest
from gateway.responses.store import ResponseStore, StoredResponse

_HEX = 48
_COUNTER = 4
_HEX_DIGITS = frozenset("0123456789abcdef")


def item_ids(response_id: str) -> Callable[[str], str]:
    """A maker of item ids (``prefix`` -> id) for the items of ``response_id``."""
    digits = response_id[5:]  # after "resp_"
    counter = itertools.count()

    def new_item_id(prefix: str) -> str:
        return f"{prefix}_{digits}{next(counter) & 0xFFFF:04x}"

    return new_item_id


def response_of(item_id: str) -> str | None:
    """The id of the response whose item ``item_id`` is (None: not one of the gateway's)."""
    digits = item_id.partition("_")[2]
    if len(digits) != _HEX + _COUNTER or not _HEX_DIGITS.issuperset(digits):
        return None
    return "resp_" + digits[:_HEX]


def _not_found(item_id: str, index: int) -> InvalidRequest:
    return InvalidRequest(
        f"Item with id '{item_id}' not found. An item_reference names an item of a response "
        "this API key stored on this gateway (not one made with store: false, not another "
        "key's, not expired).",
        param=f"input[{index}].id",
        code="invalid_value",
    )


def _find(record: StoredResponse, item_id: str) -> dict[str, Any] | None:
    for item in (*record.response.get("output", ()), *record.input):
        if isinstance(item, dict) and item.get("id") == item_id:
            return dict(item)
    return None


async def resolve_references(
    store: ResponseStore | None, items: list[dict[str, Any]], owner: str
) -> list[dict[str, Any]]:
    """``items`` with each ``item_reference`` replaced by the stored item it names."""
    for item in items:
        if item.get("type") == "item_reference":
            break
    else:
        return items  # the common case: no reference, no work
    records: dict[str, StoredResponse | None] = {}
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if item.get("type") != "item_reference":
            out.append(item)
            continue
        item_id = item.get("id")
        if not isinstance(item_id, str):
            raise InvalidRequest(
                f"Missing required parameter: 'input[{index}].id'.",
                param=f"input[{index}].id",
                code="missing_required_parameter",
            )
        if store is None:
            raise InvalidRequest(
                f"'input[{index}]' is an item_reference, which needs a response store, and "
                "this gateway has none (store.backend is 'none'): send the item itself.",
                param=f"input[{index}].id",
                code="unsupported_parameter",
            )
        response_id = response_of(item_id)
        if response_id is not None and response_id not in records:
            records[response_id] = await store.get(response_id, owner)
        record = records.get(response_id) if response_id is not None else None
        found = _find(record, item_id) if record is not None else None
        if found is None:
            raise _not_found(item_id, index)
        out.append(found)
    return out
