"""OpenAI's list object (``object: list``, ``first_id``, ``last_id``, ``has_more``) over a
page of items, as every list route reads ``order``, ``after`` and ``limit``."""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest


def page(
    items: list[dict[str, Any]],
    query: Any,
    *,
    default: int = 20,
    most: int = 100,
    missing: str = "object",
) -> dict[str, Any]:
    """OpenAI's list object over ``items`` (oldest first), by the query's ``order`` (default
    desc), ``after`` and ``limit`` (``default``, 1 to ``most``); ``missing``: what an unknown
    ``after`` names."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(
            f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", param="order"
        )
    try:
        limit = int(query.get("limit", default))
    except ValueError:
        raise InvalidRequest("Invalid 'limit': expected an integer.", param="limit") from None
    if not 1 <= limit <= most:
        raise InvalidRequest(
            f"Invalid 'limit': expected a value from 1 to {most}, but got {limit}.", param="limit"
        )
    ordered = items if order == "asc" else items[::-1]
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise InvalidRequest(f"No {missing} found with id '{after}'.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[:limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(ordered) > limit,
    }
