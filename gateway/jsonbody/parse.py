"""A request body as the JSON object the policy reads: its media type checked, parsed,
duplicate keys refused. Pure (no server, no HTTP client): the proxy, ``ft-gateway
explain`` and the external processor (gateway/extproc/) all parse a body here."""

from __future__ import annotations

from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import InvalidRequest, UnsupportedMediaType
from gateway.jsonbody.duplicatekeys import check_duplicate_keys
from gateway.policy.engine import Decision

_JSON = b"application/json"


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
