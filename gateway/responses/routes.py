"""The Responses API's routes, as the app factory mounts them: POST /v1/responses in the
configured mode (``upstream.responses``), and the stored-response routes."""

from __future__ import annotations

from starlette.routing import Route

from gateway.proxy.endpoint import ProxyEndpoint
from gateway.responses.endpoint import ResponsesEndpoint
from gateway.responses.native import NativeResponses
from gateway.responses.store import ResponseStore
from gateway.responses.stored import ITEMS, ONE, StoredResponses
from gateway.state import GatewayState


def responses_endpoint(state: GatewayState, store: ResponseStore | None) -> ProxyEndpoint:
    """POST /v1/responses: translated onto chat completions, or forwarded (native)."""
    if state.settings.upstream.responses == "native":
        return NativeResponses(state)
    return ResponsesEndpoint(state, store=store)


def stored_routes(state: GatewayState, store: ResponseStore | None) -> list[Route]:
    """GET/DELETE /v1/responses/{id} and GET .../input_items, from the store (in native
    mode there is none: the engine keeps its own responses)."""
    stored = StoredResponses(state, store)
    return [
        Route(ONE, stored.one, methods=["GET", "DELETE"]),
        Route(ITEMS, stored.one, methods=["GET"]),
    ]
