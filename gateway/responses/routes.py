"""The Responses API's stored-response routes, as the app factory mounts them (POST
/v1/responses itself is a row of the routes' table: route.py translated, native.py native)."""

from __future__ import annotations

from starlette.routing import Route

from gateway.responses.store import ResponseStore
from gateway.responses.stored import ITEMS, ONE, StoredResponses
from gateway.state import GatewayState


def stored_routes(state: GatewayState, store: ResponseStore | None) -> list[Route]:
    """GET/DELETE /v1/responses/{id} and GET .../input_items, from the store (in native
    mode there is none: the engine keeps its own responses)."""
    stored = StoredResponses(state, store)
    return [
        Route(ONE, stored.one, methods=["GET", "DELETE"]),
        Route(ITEMS, stored.one, methods=["GET"]),
    ]
