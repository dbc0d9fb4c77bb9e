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

from collections.abc import AsyncIterator, Callable

from gateway.errors import GatewayError, UpstreamError, UpstreamProtocolError, render
from gateway.proxy.events import EventSplitter

DONE = b"data: [DONE]\n\n"


async def relay_stream(
    chunks: AsyncIterator[bytes],
    *,
    max_bytes: int | None = None,
    on_error: Callable[[GatewayError], None] | None = None,
) -> AsyncIterator[bytes]:
    """Yield whole events as they come; end with an error event if the stream breaks
    (and tell ``on_error``, so that the failure is counted and logged)."""
    splitter = EventSplitter()
    size = 0
    failure: GatewayError | None = None
    try:
        async for chunk in chunks:
            if splitter.done:
                continue  # read to the end so the connection can be reused
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                failure = stream_too_large(max_bytes)
                break
            events, error = splitter.feed(chunk)
            if events:
                yield events
            if error is not None:
                failure = error
                break
    except UpstreamError as exc:
        if not splitter.done:
            failure = exc
    else:
        if failure is None and not splitter.done:
            failure = stream_cut_short()
    if failure is not None:
        if on_error is not None:
            on_error(failure)
        yield error_end(failure)


def error_end(exc: GatewayError) -> bytes:
    """The end of a broken stream: the error as an event, then ``data: [DONE]``."""
    return render(exc, event=True) + DONE


def stream_too_large(limit: int) -> UpstreamProtocolError:
    """The failure of a stream past ``limits.max_stream_bytes``."""
    return UpstreamProtocolError(f"The engine's stream is larger than the limit ({limit} bytes).")


def stream_cut_short() -> UpstreamProtocolError:
    """The failure of a stream that ended without ``data: [DONE]``."""
    return UpstreamProtocolError("The engine ended the stream before it was complete.")
