"""What the gateway accepts as an engine's answer; anything else is a 502.

An OpenAI client can only use an error (4xx/5xx, normalised in engineerrors),
a JSON body, or, when it asked to stream, an event stream. A redirect is
never followed and never passed on: the OpenAI SDKs follow redirects, so
relaying one would send the client, and its API key, wherever the engine
pointed. A 200 that is not what was asked for (HTML from a misrouted proxy,
truncated JSON, JSON to a streaming request) would make the SDK fail with a
parse error instead of an API error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway._types import Headers
from gateway.errors import OPENAI_ERRORS, ErrorShape, UpstreamProtocolError
from gateway.proxy.engineerrors import normalise_error

_JSON = b"application/json"


def media_type(headers: Headers) -> bytes:
    """The bare, lower-case media type of ``headers``' Content-Type (b"" if none)."""
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower()
    return b""


def _is_json(media: bytes) -> bool:
    return media == b"application/json" or media.endswith(b"+json")


def check_head(status: int, headers: Headers, *, stream: bool) -> bool:
    """Whether the answer is a stream to relay; UpstreamProtocolError if unusable.
    Error statuses (400-599) pass here: their bodies are normalised, whatever they hold;
    any other status, a redirect or one HTTP has not (below 100, past 599), is a 502."""
    if 200 <= status < 300:
        media = media_type(headers)
        if stream and media == b"text/event-stream":
            return True
        if stream:
            raise UpstreamProtocolError("The engine answered a streaming request without a stream.")
        if not _is_json(media):
            raise UpstreamProtocolError("The engine's answer is not JSON.")
        return False
    if 400 <= status < 600:
        return False
    why = " (it never follows or relays a redirect)" if 300 <= status < 400 else ""
    raise UpstreamProtocolError(
        f"The engine answered HTTP {status:03d}, which the gateway does not pass on{why}."
    )


def error_answer(
    status: int,
    headers: Headers,
    data: bytes,
    *,
    secrets: Sequence[str] = (),
    shape: ErrorShape = OPENAI_ERRORS,
    request_id: bytes = b"",
) -> tuple[int, Headers, bytes, Any]:
    """The status, headers and body the client gets for an engine's error answer
    (status >= 400) with ``headers`` (those it may get), normalised without ``secrets``
    and written in the client's API's ``shape``, and the inner error it holds."""
    error = normalise_error(status, data, secrets=secrets)
    status, data = shape.relayed(status, error, request_id.decode() or None)
    headers = [(n, v) for n, v in headers if n != b"content-type"]
    headers.append((b"content-type", _JSON))
    headers.append((b"content-length", str(len(data)).encode()))
    return status, headers, data, error
