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

import orjson

from gateway._types import Headers
from gateway.errors import UpstreamProtocolError
from gateway.proxy.engineerrors import normalise_error_body

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
    Error statuses pass here: their bodies are normalised, whatever they hold."""
    if status >= 400:
        return False
    if not 200 <= status < 300:
        raise UpstreamProtocolError(
            f"The engine answered HTTP {status}, which the gateway does not pass on "
            "(it never follows or relays a redirect)."
        )
    media = media_type(headers)
    if stream and media == b"text/event-stream":
        return True
    if stream:
        raise UpstreamProtocolError("The engine answered a streaming request without a stream.")
    if not _is_json(media):
        raise UpstreamProtocolError("The engine's answer is not JSON.")
    return False


def check_json_body(data: bytes) -> None:
    """UpstreamProtocolError unless ``data`` is one JSON value."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError("The engine's answer is not valid JSON.") from None


def whole_answer(status: int, headers: Headers, data: bytes) -> tuple[Headers, bytes]:
    """The headers and body the client gets for an engine's whole (non-stream) answer
    with ``headers`` (those it may get): an error normalised, a 2xx checked to be JSON."""
    if status >= 400:
        data = normalise_error_body(status, data)
        headers = [(n, v) for n, v in headers if n != b"content-type"]
        headers.append((b"content-type", _JSON))
    else:
        check_json_body(data)
    headers.append((b"content-length", str(len(data)).encode()))
    return headers, data
