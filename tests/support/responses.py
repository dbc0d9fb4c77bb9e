"""Bodies of the Responses API as the tests send them and read them back, and settings
with a response store."""

from __future__ import annotations

import json
from typing import Any

from gateway.settings import Settings
from tests.support.bodies import MODEL, sse_events
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


# A stream's first events, and those of one text message with one delta, in order.
STARTED = ["response.created", "response.in_progress"]
TEXT_MESSAGE = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]
FAILED = ["error", "response.failed"]


def response_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A Responses event stream as (event name, data) pairs; checks each event's framing
    (an ``event:`` line, then a ``data:`` line whose ``type`` is the event's name)."""
    events = []
    for event in sse_events(body):
        lines = event.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), event
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:]
        events.append((lines[0][7:], data))
    return events
