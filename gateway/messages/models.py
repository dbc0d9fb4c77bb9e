"""GET /v1/models in Anthropic's shape, for a request that carries ``anthropic-version``.

``{data: [{type: "model", id, display_name, created_at}], has_more, first_id,
last_id}``, paged by ``limit`` (1 to 1000, default 20), ``after_id`` and
``before_id`` as Anthropic's is (Claude Code's model discovery asks
``?limit=1000``). The cards are those of the OpenAI list the gateway already
has: a fleet's table (fleet/models.py), or, for the single deployment, the
engine's own list, reshaped here (``AnthropicModels``), so both shapes always
list the same names.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

import orjson

from gateway._types import Headers, Receive, Scope, Send
from gateway.errors import InvalidRequest, UpstreamProtocolError
from gateway.messages.call import MessagesCall
from gateway.proxy.call import Call
from gateway.proxy.route import Route

ANTHROPIC_VERSION = b"anthropic-version"
_JSON = b"application/json"


def anthropic_card(card: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI model card (``id``, ``created``) as Anthropic's."""
    created = card.get("created")
    when = datetime.datetime.fromtimestamp(
        created if isinstance(created, int) else 0, tz=datetime.UTC
    )
    name = str(card.get("id"))
    return {
        "type": "model",
        "id": name,
        "display_name": name,
        "created_at": when.isoformat().replace("+00:00", "Z"),
    }


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def model_page(cards: Sequence[dict[str, Any]], query: bytes) -> dict[str, Any]:
    """The page of ``cards`` (OpenAI's) that the query string asks for, in Anthropic's
    list shape; a 400 for a ``limit`` outside 1..1000."""
    params = parse_qs(query.decode("latin-1"))
    raw = _one(params, "limit")
    try:
        limit = int(raw) if raw is not None else 20
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1000:
        raise InvalidRequest(
            "Invalid 'limit': it must be an integer from 1 to 1000.", param="limit"
        )
    listed = [anthropic_card(c) for c in cards]
    ids = [c["id"] for c in listed]
    after, before = _one(params, "after_id"), _one(params, "before_id")
    if before is not None:
        end = ids.index(before) if before in ids else len(ids)
        start = max(0, end - limit)
        page = listed[start:end]
        more = start > 0
    else:
        start = ids.index(after) + 1 if after in ids else 0
        page = listed[start : start + limit]
        more = start + limit < len(listed)
    return {
        "data": page,
        "has_more": more,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
    }


class AnthropicModelsCall(MessagesCall):
    """A model-list request, with the query string its page is read from."""

    __slots__ = ("query",)

    def __init__(self, route: str | None, scope: Scope, send: Send) -> None:
        super().__init__(route, scope, send)
        self.query: bytes = scope.get("query_string", b"")


class AnthropicModels(Route):
    """GET /v1/models for the single deployment, in Anthropic's shape: the engine's own
    list, reshaped."""

    call_type = AnthropicModelsCall
    upstream_path = "/v1/models"
    forward_query = False  # the page is the gateway's to cut

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes]:
        cards = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(cards, list):
            raise UpstreamProtocolError("The engine's model list is not a list.")
        query = call.query if isinstance(call, AnthropicModelsCall) else b""
        page = model_page([c for c in cards if isinstance(c, dict)], query)
        return [(b"content-type", _JSON)], orjson.dumps(page)


def wants_anthropic(headers: Headers) -> bool:
    """Whether a request speaks Anthropic's API (the SDKs and Claude Code send
    ``anthropic-version`` on every request, whatever its value)."""
    return any(name == ANTHROPIC_VERSION for name, _ in headers)


class ByVersion:
    """An ASGI endpoint that sends a request carrying ``anthropic-version`` to
    ``anthropic``, any other to ``openai``."""

    def __init__(self, anthropic: Any, openai: Any) -> None:
        self.anthropic = anthropic
        self.openai = openai

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.anthropic if wants_anthropic(scope["headers"]) else self.openai
        await endpoint(scope, receive, send)
