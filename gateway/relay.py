"""Relaying an engine's SSE stream to the client, event by event.

Whole events are passed on unchanged the moment their blank line arrives (see
events.py for why an unfinished event is held). Before the response starts an
error is a status code; after it starts it is an event: an engine failure, a
broken event, the engine's own error event, a stream past ``max_bytes``, or an
engine that ends the stream without ``data: [DONE]``, becomes
``data: {"error": ...}`` followed by ``data: [DONE]``, as OpenAI does mid-stream
(openai-python raises on it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

from gateway.errors import GatewayError, UpstreamError, UpstreamProtocolError
from gateway.events import EventSplitter

DONE = b"data: [DONE]\n\n"


def sse_error_event(exc: GatewayError) -> bytes:
    """An SSE event carrying an OpenAI-shaped error."""
    return b"data: " + orjson.dumps(exc.openai_error()) + b"\n\n"


async def relay_stream(
    chunks: AsyncIterator[bytes], *, max_bytes: int | None = None
) -> AsyncIterator[bytes]:
    """Yield whole events as they come; end with an error event if the stream breaks."""
    splitter = EventSplitter()
    size = 0
    try:
        async for chunk in chunks:
            if splitter.done:
                continue  # read to the end so the connection can be reused
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                yield _error_end(
                    UpstreamProtocolError(
                        f"The engine's stream is larger than the limit ({max_bytes} bytes)."
                    )
                )
                return
            events, error = splitter.feed(chunk)
            if events:
                yield events
            if error is not None:
                yield _error_end(error)
                return
    except UpstreamError as exc:
        if not splitter.done:
            yield _error_end(exc)
        return
    if not splitter.done:
        yield _error_end(
            UpstreamProtocolError("The engine ended the stream before it was complete.")
        )


def _error_end(exc: GatewayError) -> bytes:
    return sse_error_event(exc) + DONE
