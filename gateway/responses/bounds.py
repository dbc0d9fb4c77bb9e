"""What a stored response may hold: OpenAI's bounds on ``metadata``, and each key's share
of the store in bytes.

A stored response keeps what its request echoes for 30 days (``store.ttl``), while
the limiter charges only what the engine read: without bounds one request could park
megabytes of ``metadata`` for a few tokens. So ``metadata`` is bounded as OpenAI
bounds it (16 pairs, keys of at most 64 characters, string values of at most 512),
and every owner's stored bytes are counted by the store (``put`` returns the total)
against ``store.max_bytes_per_key``: a request that would store one more response
once the owner is at its share gets 429 ``insufficient_quota`` before the engine is
asked. The check reads this process's last figure for the owner (no round trip) and
asks the store only when that figure says no (responses may have expired or been
deleted since), so a key can pass its share by at most one response per process.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest, QuotaExceeded
from gateway.responses.store import ResponseStore

MAX_PAIRS = 16
MAX_KEY = 64
MAX_VALUE = 512
_OWNERS = 4096  # figures remembered per process (owners past it are asked again)


def check_metadata(value: Any, param: str = "metadata") -> None:
    """InvalidRequest unless ``value`` is null or OpenAI's metadata: at most 16 string
    pairs, keys of at most 64 characters, values of at most 512."""
    if value is None:
        return
    if type(value) is not dict:
        raise _refused(param, "invalid_type", f"Invalid type for '{param}': expected an object")
    if len(value) > MAX_PAIRS:
        raise _refused(
            param,
            "object_above_max_properties",
            f"Invalid '{param}': too many properties. Expected an object with at most "
            f"{MAX_PAIRS} properties, but got an object with {len(value)} properties instead.",
        )
    for key, member in value.items():
        where = f"{param}.{key}"
        if len(key) > MAX_KEY:
            raise _refused(param, "string_above_max_length", _too_long(param, "key", MAX_KEY, key))
        if type(member) is not str:
            raise _refused(where, "invalid_type", f"Invalid type for '{where}': expected a string")
        if len(member) > MAX_VALUE:
            raise _refused(
                where, "string_above_max_length", _too_long(where, "string", MAX_VALUE, member)
            )


def _too_long(where: str, what: str, most: int, text: str) -> str:
    return (
        f"Invalid '{where}': {what} too long. Expected a {what} with maximum length {most}, "
        f"but got a {what} with length {len(text)} instead."
    )


def _refused(param: str, code: str, message: str) -> InvalidRequest:
    if code == "invalid_type":
        message += ", but got another type instead."
    return InvalidRequest(message, param=param, code=code)


class StoreShare:
    """Each owner's bytes in the store, as this process last heard, against the share."""

    __slots__ = ("limit", "held")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        # Owner -> its bytes, as the store last said (the route tests its fast path on it).
        self.held: dict[str, int] = {}

    def noted(self, owner: str, held: int) -> None:
        """The store says ``owner`` now keeps ``held`` bytes."""
        if len(self.held) >= _OWNERS and owner not in self.held:
            self.held.clear()
        self.held[owner] = held

    async def admit(self, store: ResponseStore | None, owner: str, size: int) -> None:
        """QuotaExceeded if ``owner`` cannot store ``size`` more bytes (its expired and
        deleted responses no longer count), by the store's own figure."""
        limit = self.limit
        if store is None or limit is None:
            return
        held = await store.held(owner)
        self.noted(owner, held)
        if held + size > limit:
            raise QuotaExceeded(
                f"This API key's stored responses fill its share of the response store "
                f"({held} of {limit} bytes): delete some (DELETE /v1/responses/{{id}}), wait "
                "for them to expire, or send 'store': false.",
                headers={"x-should-retry": "false"},
            )
