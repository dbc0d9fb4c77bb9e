"""GET /v1/models and GET /v1/models/{model} of a fleet, answered from its table (and
of one deployment whose names ``upstream.models`` lists).

OpenAI's list shape (``object: list``, each ``{id, object: model, created,
owned_by}``): every served name and every alias not hidden, whether or not its
replicas are up (a request to a deployment that is down gets its 503, not a 404).
A request that carries ``anthropic-version`` gets the same names in Anthropic's
shape, paged as Anthropic's are, and Anthropic's errors (gateway/messages/models.py).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.errors import GatewayError, ModelNotFound
from gateway.messages.errors import ANTHROPIC_ERRORS
from gateway.messages.models import anthropic_card, model_page, wants_anthropic
from gateway.proxy.headers import request_id_of
from gateway.state import GatewayState


class ModelList:
    """The model endpoints of one app."""

    def __init__(self, state: GatewayState) -> None:
        self.state = state
        self.created = int(time.time())

    def _card(self, name: str, owned_by: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": owned_by}

    def _names(self) -> dict[str, tuple[str, bool]]:
        """Each name a client may ask for: its owner, and whether the list hides it."""
        engines = self.state.engines
        if not engines.fleet:  # one deployment with upstream.models
            models = self.state.settings.upstream.models or ()
            return {name: (engines.default.owned_by, False) for name in models}
        return {name: (t.engine.owned_by, t.hidden) for name, t in engines.targets.items()}

    def _allowed(self, request: Request) -> frozenset[str] | None:
        """The model names the caller's key may use (None: any); 401 without a key."""
        state = self.state
        client = profile = None
        if state.authenticate is not None:
            client, profile = state.authenticate(request.scope["headers"])
        return state.models.allowed(client, profile) if state.models is not None else None

    async def list(self, request: Request) -> Response:
        """Every model name the caller may ask for."""
        anthropic = wants_anthropic(request.scope["headers"])
        try:
            allowed = self._allowed(request)
            data = [
                self._card(name, owned_by)
                for name, (owned_by, hidden) in self._names().items()
                if not hidden and (allowed is None or name in allowed)
            ]
            if anthropic:
                return _anthropic(request, model_page(data, request.scope["query_string"]))
        except GatewayError as exc:
            if anthropic:
                return _anthropic_error(request, exc)
            raise
        return JSONResponse({"object": "list", "data": data})

    async def one(self, request: Request) -> Response:
        """One model's card (a hidden alias too: it is unlisted, not refused); a name
        no deployment serves, or the caller may not use, is OpenAI's 404."""
        anthropic = wants_anthropic(request.scope["headers"])
        try:
            allowed = self._allowed(request)
            name: str = request.path_params["model"]
            found = self._names().get(name)
            if found is None or (allowed is not None and name not in allowed):
                raise ModelNotFound(name)
        except GatewayError as exc:
            if anthropic:
                return _anthropic_error(request, exc)
            raise
        card = self._card(name, found[0])
        return _anthropic(request, anthropic_card(card)) if anthropic else JSONResponse(card)


def _anthropic(request: Request, body: dict[str, Any]) -> Response:
    request_id = request_id_of(request.scope["headers"]).decode()
    headers = {"request-id": request_id, "x-request-id": request_id}
    return JSONResponse(body, headers=headers)


def _anthropic_error(request: Request, exc: GatewayError) -> Response:
    request_id = request_id_of(request.scope["headers"]).decode()
    headers = {**exc.headers, "request-id": request_id, "x-request-id": request_id}
    return Response(
        ANTHROPIC_ERRORS.body(exc, request_id),
        status_code=ANTHROPIC_ERRORS.status(exc),
        headers=headers,
        media_type="application/json",
    )
