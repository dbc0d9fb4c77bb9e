"""POST /v1/messages/count_tokens in translate mode: the engine's own count of the prompt.

The body is checked by the ``/v1/messages/count_tokens`` policy route (the same
rules as the Messages route's for what both take) and translated as a Messages
request is; the engine is asked for one token, and the answer is its
``usage.prompt_tokens``: the prompt as its chat template renders it and its
tokenizer counts it, tools and the generation prompt included, which no
estimate outside the engine can match. The one token is metered like any.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import UpstreamProtocolError
from gateway.messages.route import TranslatedMessages
from gateway.proxy.call import Call
from gateway.routes import COUNT_TOKENS, ROUTES

_JSON = b"application/json"


class TranslatedCount(TranslatedMessages):
    """POST /v1/messages/count_tokens, counted by the engine's chat route."""

    row = ROUTES[COUNT_TOKENS]
    count = True

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes]:
        usage = answer.get("usage") if isinstance(answer, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if type(tokens) is not int:
            raise UpstreamProtocolError("The engine's answer does not count the prompt's tokens.")
        return [(b"content-type", _JSON)], orjson.dumps({"input_tokens": tokens})
