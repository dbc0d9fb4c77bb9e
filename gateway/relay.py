"""Relaying an engine's SSE stream to the client, chunk by chunk.

Chunks are passed on unchanged the moment they arrive (no parsing, no
buffering). Before the response starts an error is a status code; after it
starts it is an event: an engine failure, or an engine that ends the stream
without ``data: [DONE]``, becomes ``data: {"error": ...}`` followed by
``data: [DONE]``, as OpenAI does mid-stream (openai-python raises on it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

from gateway.errors import GatewayError, UpstreamError, UpstreamProtocolError

DONE = b"data: [DONE]\n\n"


def sse_error_event(exc: GatewayError) -> bytes:
    """An SSE event carrying an OpenAI-shaped error."""
    return b"data: " + orjson.dumps(exc.openai_error()) + b"\n\n"


def _end_with_error(tail: bytes, exc: GatewayError) -> bytes:
    # If the engine stopped in the middle of an event, end that event first so
    # the error is parsed as an event of its own.
    prefix = b"" if not tail or tail.endswith(b"\n\n") or tail.endswith(b"\r\n\r\n") else b"\n\n"
    return prefix + sse_error_event(exc) + DONE


async def relay_stream(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Yield ``chunks`` as they come; end with an error event if the engine fails."""
    tail = b""
    try:
        async for chunk in chunks:
            if not chunk:
                continue
            tail = chunk[-16:] if len(chunk) >= 16 else (tail + chunk)[-16:]
            yield chunk
    except UpstreamError as exc:
        yield _end_with_error(tail, exc)
        return
    if not tail.rstrip().endswith(b"[DONE]"):
        yield _end_with_error(
            tail,
            UpstreamProtocolError("The engine ended the stream before it was complete."),
        )
