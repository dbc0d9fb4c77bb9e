"""Bodies of the Responses API as the tests send them, and a gateway with a response store."""

from __future__ import annotations

import json
from typing import Any

from gateway.settings import Settings
from tests.support.bodies import MODEL
from tests.support.gateways import gateway_settings

RESPONSES = "/v1/responses"


def responses_request(**fields: Any) -> dict[str, Any]:
    """A Responses request: the model, a string input, and ``fields``."""
    return {"model": MODEL, "input": "hi", **fields}


def store_settings(
    upstream: str | None = None, *, backend: str = "memory", **store: Any
) -> Settings:
    """The default settings with the response store ``backend`` (and ``store`` keys)."""
    flags: dict[tuple[str, ...], Any] = {("store", "backend"): backend}
    flags.update({("store", k): v for k, v in store.items()})
    return gateway_settings(upstream, overrides=flags)


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A Responses event stream as (event name, data) pairs; checks each event's framing."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:]
        events.append((lines[0][7:], data))
    return events
