"""The affinity key of a request: what makes two requests want the same replica.

Engines keep the KV cache of recent prompts, so the requests that share a
prompt prefix (the turns of one conversation, or one long system prompt) are
cheap where the last of them ran. The key comes from the first configured
source present in the request, read from the request as the client sent it
(before the policy strips ``prompt_cache_key``):

- ``prompt_cache_key``: OpenAI's own field for exactly this;
- ``header``: a session header (``affinity.header``, default ``X-Session-ID``);
- ``api_key``: the name of the client's API key;
- ``content``: a hash of the leading content, whole: the leading system or
  developer messages and the ``leading_messages`` messages after them (a
  conversation's first turn stays the same in every later turn), or the
  first ``prompt_chars`` characters of a completion's prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway._types import Headers
from gateway.routing.config import Affinity
from gateway.routing.ring import key_hash

_LEADING_ROLES = ("system", "developer")


def affinity_key(
    body: dict[str, Any],
    headers: Headers,
    *,
    client: str | None,
    config: Affinity,
    content: str = "messages",
) -> tuple[str, int] | None:
    """(source, 64-bit key) from the first source of ``config.keys`` the request has;
    ``content`` names the body field the route keeps its conversation or prompt in."""
    for source in config.keys:
        data = _source(source, body, headers, client, config, content)
        if data:
            return source, key_hash(data)
    return None


def _source(
    source: str,
    body: dict[str, Any],
    headers: Headers,
    client: str | None,
    config: Affinity,
    content: str,
) -> bytes | None:
    if source == "prompt_cache_key":
        value = body.get("prompt_cache_key")
        return b"p:" + value.encode() if isinstance(value, str) and value else None
    if source == "header":
        name = config.header.lower().encode()
        for key, value in headers:
            if key == name and value:
                return b"h:" + value
        return None
    if source == "api_key":
        return b"k:" + client.encode() if client else None
    return _content(body.get(content), config)


def _content(prompt: Any, config: Affinity) -> bytes | None:
    """A conversation (a list of messages or items) keys by its leading messages; a
    prompt (text, token ids, or a batch of either) by its first characters."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
        try:
            return b"c:" + orjson.dumps(_leading(prompt, config.leading_messages))
        except orjson.JSONEncodeError:  # an integer past 64 bits: no content key
            return None
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of prompts (strings or token arrays): the first
    if isinstance(prompt, str) and prompt:
        return b"t:" + prompt[: config.prompt_chars].encode()
    if isinstance(prompt, list) and prompt:  # token ids
        return b"t:" + orjson.dumps(prompt[: config.prompt_chars // 4])
    return None


def _leading(messages: Sequence[Any], count: int) -> Sequence[Any]:
    start = 0
    while start < len(messages):
        message = messages[start]
        if not (isinstance(message, dict) and message.get("role") in _LEADING_ROLES):
            break
        start += 1
    return messages[: start + count]
