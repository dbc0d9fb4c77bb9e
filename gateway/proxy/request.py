"""Reading a client's request body within its limits (its JSON: gateway/jsonbody/parse.py)."""

from __future__ import annotations

from collections.abc import Awaitable

from gateway._types import Headers, Message, Receive
from gateway.errors import BodyTooLarge, InvalidRequest


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
