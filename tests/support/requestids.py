"""The request ids the gateway sends engines, computed as docs/requests.md says (not by
the gateway's code): a UUID, derived with uuid5 in the gateway's namespace where the
request id is not one, and one of its own for each of a fan-out's n requests."""

from __future__ import annotations

import uuid

CLIENT_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "ft-gateway:request-id")


def engine_id(request_id: str) -> str:
    """The X-Request-ID an engine gets for the client-facing ``request_id``."""
    try:
        return str(uuid.UUID(request_id))
    except ValueError:
        return str(uuid.uuid5(CLIENT_ID_NAMESPACE, request_id))


def choice_id(engine_request_id: str, index: int) -> bytes:
    """Fan-out request ``index``'s X-Request-ID, for the request's ``engine_request_id``."""
    return str(uuid.uuid5(CLIENT_ID_NAMESPACE, f"{engine_request_id}/{index}")).encode()


def choice_index(sent: bytes | None, request_id: str, n: int = 8) -> int:
    """Which of a fan-out's requests an engine request is, by the X-Request-ID it carries
    (``sent``), for the client-facing ``request_id``."""
    base = engine_id(request_id)
    for i in range(n):
        if choice_id(base, i) == sent:
            return i
    raise LookupError(f"{sent!r} is none of the first {n} fan-out ids of {request_id!r}")
