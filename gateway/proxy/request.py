"""Reading a client's request: the body within its limits, then the JSON object."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import orjson

from gateway._types import Headers, Message, Receive
from gateway.errors import BodyTooLarge, InvalidRequest, UnsupportedMediaType
from gateway.policy.engine import Decision
from gateway.proxy.duplicatekeys import check_duplicate_keys

_JSON = b"application/json"


async def read_body(
    receive: Receive,
    headers: Headers,
    limit: int,
    named: dict[bytes, bytes] | None = None,
    first: Message | None = None,
    rest: Awaitable[Message] | None = None,
) -> bytes | None:
    """The whole request body; None if the client left while sending it. ``named``:
    the headers by name where no name repeats (Call.named): a look-up in it gives
    what a scan of the list would. ``first``: the first message, where the caller took
    it already, or ``rest``: what is left to await for it (firstmessage.py)."""
    if named is not None:
        length = named.get(b"content-length")
        framing = 0 if length is None else 2
        if b"transfer-encoding" in named:
            framing |= 1
        elif length is not None:
            try:  # (_check_length written out: it runs on every request)
                if int(length) > limit:
                    _check_length(length, limit)
            except ValueError:
                _check_length(length, limit)
    else:
        framing = 0
        for name, value in headers:
            if name == b"transfer-encoding":
                framing |= 1
            elif name == b"content-length":
                framing |= 2
                _check_length(value, limit)
    if framing == 3:
        # RFC 9112 6.3: a request with both may be smuggling one past a proxy; h11
        # lets it through (httptools refuses it), so refuse and close here.
        raise InvalidRequest(
            "Request has both Content-Length and Transfer-Encoding.",
            code="invalid_header",
            headers={"Connection": "close"},
        )
    parts: list[bytes] = []
    size = 0
    while True:
        if first is not None:
            message, first = first, None
        elif rest is not None:
            message, rest = await rest, None
        else:
            message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(
                    f"Request body is larger than this gateway's limit of {limit} bytes."
                )
            parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


def _check_length(value: bytes, limit: int) -> None:
    try:
        declared = int(value)
    except ValueError:
        raise InvalidRequest("Invalid Content-Length header.", code="invalid_header") from None
    if declared > limit:
        raise BodyTooLarge(f"Request body is larger than this gateway's limit of {limit} bytes.")


def parse_request(
    raw: bytes, headers: Headers, named: dict[bytes, bytes] | None = None
) -> dict[str, Any]:
    """The request body as a JSON object, or an InvalidRequest saying what is wrong.
    ``named``: the headers by name where no name repeats (Call.named)."""
    if named is not None:
        media_type = named.get(b"content-type")
        if media_type is not None and media_type != _JSON:
            _check_media(media_type)
    else:
        for name, value in headers:
            if name == b"content-type":
                _check_media(value)
    if not raw.strip():
        raise InvalidRequest(
            "We could not parse the JSON body of your request: the body is empty.",
            code="invalid_json",
        )
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"We could not parse the JSON body of your request: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.", code="invalid_json")
    check_duplicate_keys(raw, data)
    return data


def _check_media(value: bytes) -> None:
    media = value.split(b";", 1)[0].strip().lower()
    if media != _JSON and not media.endswith(b"+json"):
        raise UnsupportedMediaType(
            "Request body must be JSON: send 'Content-Type: application/json'.",
            code="unsupported_media_type",
        )


def request_content(raw: bytes, decision: Decision) -> bytes:
    """The body sent to the engine: the client's bytes unless the policy changed it."""
    return orjson.dumps(decision.body) if decision.changed else raw
