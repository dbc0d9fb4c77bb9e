"""GET and DELETE /v1/responses/{id}, and GET /v1/responses/{id}/input_items.

Served from the response store, for the API key that made the response only:
to any other key, and for an unknown or expired id, the answer is OpenAI's 404.
Each request is an Exchange like any proxied one (access log, metrics), under
the route's template name so that ids never become metric labels.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import GatewayError, NotFound, render
from gateway.listing import page
from gateway.observe.exchange import Exchange
from gateway.proxy.headers import request_id_of
from gateway.responses.store import ResponseStore, owner_of
from gateway.state import GatewayState

ONE = "/v1/responses/{response_id}"
ITEMS = "/v1/responses/{response_id}/input_items"


def _not_found(response_id: str) -> NotFound:
    return NotFound(f"No response found with id '{response_id}'.", param="response_id", code=None)


def _no_store(mode: str) -> NotFound:
    why = (
        "in native mode (upstream.responses: native) the engine keeps its own responses"
        if mode == "native"
        else "store.backend is 'none'"
    )
    return NotFound(f"This gateway keeps no responses ({why}).", param="response_id", code=None)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


class StoredResponses:
    """The read and delete routes over one store (None: none configured)."""

    def __init__(self, state: GatewayState, store: ResponseStore | None) -> None:
        self.state = state
        self.store = store

    async def one(self, request: Request) -> Response:
        route = ITEMS if request.url.path.endswith("/input_items") else ONE
        return await self._observed(request, route)

    async def _observed(self, request: Request, route: str) -> Response:
        state = self.state
        headers = request.scope["headers"]
        request_id = request_id_of(headers)
        exchange = Exchange(
            request.method, request.url.path, route, request_id.decode(), policed=False
        )
        state.observer.started(exchange)
        try:
            response = await self._answer(request, route, exchange)
        except GatewayError as exc:
            exchange.error_code = exc.code
            response = Response(
                render(exc),
                status_code=exc.status,
                headers=exc.headers,
                media_type="application/json",
            )
        response.headers["x-request-id"] = request_id.decode()
        exchange.status = response.status_code
        exchange.bytes_out = len(response.body)
        state.observer.finished(exchange)
        return response

    async def _answer(self, request: Request, route: str, exchange: Exchange) -> Response:
        headers = request.scope["headers"]
        if self.state.authenticate is not None:
            exchange.client, _ = self.state.authenticate(headers)
        response_id = request.path_params["response_id"]
        if self.store is None:
            raise _no_store(self.state.settings.upstream.responses)
        authorization = next((v for n, v in headers if n == b"authorization"), None)
        owner = owner_of(exchange.client, authorization)
        if request.method == "DELETE":
            if not await self.store.delete(response_id, owner):
                raise _not_found(response_id)
            return _json({"id": response_id, "object": "response", "deleted": True})
        record = await self.store.get(response_id, owner)
        if record is None:
            raise _not_found(response_id)
        exchange.model = record.response.get("model")
        if route == ITEMS:
            return _json(
                page([*record.history, *record.input], request.query_params, missing="input item")
            )
        return _json(record.response)
