"""The one relay loop: an engine's stream to the client, whole event by whole event.

Every route streams through here; what differs between them is the route's
StreamShaper (route.py), which turns the engine's whole events into the
client's bytes and frames a failure. Whole events are handed on the moment
their blank line arrives (see events.py for why an unfinished event is held);
each is parsed once, by the one reader (events.py's EventReader), and the
shaper, the trace and the usage read that parse. Before the response starts an
error is a status code; after it starts it is the shaper's framing: an engine
failure, a broken event, the engine's own error event, a stream past
``max_bytes``, or an engine that ends the stream before its end event. The
stream ends at the engine's end event (``data: [DONE]``): nothing after it is
read here (reply.py tells the engine's response, which may still read the body's
own end to keep its connection). The loop is an async generator over an async
iterable of bytes, so tests feed it bytes without HTTP.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence

from gateway.errors import GatewayError, UpstreamError, UpstreamProtocolError
from gateway.observe.exchange import Exchange
from gateway.proxy.engineerrors import scrubbed
from gateway.proxy.events import EngineStreamError, EventReader
from gateway.proxy.openai import DONE, ChatStream, error_end
from gateway.proxy.shaper import StreamShaper

__all__ = ["DONE", "error_end", "relay_stream", "stream_cut_short", "stream_too_large"]


async def relay_stream(
    chunks: AsyncIterator[bytes],
    shaper: StreamShaper | None = None,
    *,
    max_bytes: int | None = None,
    record: Exchange | None = None,
    secrets: Callable[[], Sequence[str]] | None = None,
) -> AsyncIterator[bytes]:
    """Yield the client's bytes as the engine's whole events come (``shaper``: the
    route's, a chat stream's by default); end with the shaper's failure framing if
    the stream breaks, and write the first byte's time, the failure and the trace's
    reading on ``record``. ``secrets``: what no error event may show (the request's
    safetext.known_secrets), asked for only when the engine's own error ends the stream."""
    if shaper is None:
        shaper = ChatStream(hide=False)
    trace = record.trace if record is not None else None
    reader = EventReader()
    size = 0
    failure: GatewayError | None = None
    start = shaper.start()
    if start:
        yield start
    try:
        async for chunk in chunks:
            if size == 0 and record is not None:
                record.first_byte = time.perf_counter()
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                failure = stream_too_large(max_bytes)
                break
            raw, parsed, error = reader.feed(chunk)
            if raw:
                if trace is not None and parsed:
                    trace.chunks(parsed)
                out = shaper.events(raw, parsed, done=reader.done)
                if out:
                    yield out
                if shaper.ended:
                    break  # the client's stream ends here, whatever the engine sends on
            if error is not None:
                failure = error
                break
    except UpstreamError as exc:
        if not shaper.ended:
            failure = exc
    else:
        if failure is None and not shaper.ended:
            failure = stream_cut_short()
    if failure is None:
        tail, failure = await shaper.finish()
        if tail:
            yield tail
    if failure is not None:
        if secrets is not None and isinstance(failure, EngineStreamError):
            failure.error = scrubbed(failure.error, secrets())
        if record is not None:
            record.failed(failure)
        yield shaper.fail(failure)


def stream_too_large(limit: int) -> UpstreamProtocolError:
    """The failure of a stream past ``limits.max_stream_bytes``."""
    return UpstreamProtocolError(f"The engine's stream is larger than the limit ({limit} bytes).")


def stream_cut_short() -> UpstreamProtocolError:
    """The failure of a stream that ended without its end event (``data: [DONE]``)."""
    return UpstreamProtocolError("The engine ended the stream before it was complete.")
