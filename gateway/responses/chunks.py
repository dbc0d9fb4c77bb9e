"""An engine's chat-completions stream as parsed chunks, each parsed once.

The chat routes relay events as bytes and parse each only to check it
(proxy/events.py); the Responses route needs each chunk's value to translate
it, so here the one parse both checks and reads. Same rules as the relay's
splitter: whole events only (an unfinished one is held until its blank line),
LF or CRLF line ends, ``data: [DONE]`` ends the stream, an event that is not a
JSON object or carries ``error`` (the engine's own error, normalised) ends it
with that failure, and so does an event past 1 MiB.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import GatewayError, UpstreamProtocolError
from gateway.proxy.events import MAX_EVENT_BYTES, parse_data

_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})


class ChunkReader:
    """Takes raw stream bytes; gives back the parsed chunks of the whole events in them."""

    def __init__(self) -> None:
        self._pending = b""
        self.done = False

    def feed(self, data: bytes) -> tuple[list[dict[str, Any]], GatewayError | None]:
        """The chunks completed by ``data``, and the failure that ends the stream if any."""
        if not self._pending and data[:6] == b"data: " and data.find(b"\n") == len(data) - 2:
            if data[-1:] == b"\n":
                # One whole event in one chunk, as engines send them: the hot path.
                payload = data[6:-2]
                if payload == b"[DONE]":
                    self.done = True
                    return [], None
                value = parse_data(payload)
                if isinstance(value, GatewayError):
                    return [], value
                return [value], None
        if self._pending:
            data = self._pending + data
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        end = data.rfind(b"\n\n")
        if end < 0:
            self._pending = data
            if len(data) > MAX_EVENT_BYTES:
                return [], UpstreamProtocolError(
                    "The engine sent a stream event larger than 1 MiB."
                )
            return [], None
        self._pending = data[end + 2 :]
        chunks: list[dict[str, Any]] = []
        for event in data[:end].split(b"\n\n"):
            if event[:6] == b"data: " and b"\n" not in event:
                payload = event[6:]  # the shape every engine sends: one data line
            else:
                found = self._payload(event)
                if isinstance(found, GatewayError):
                    return chunks, found
                if found is None:
                    continue
                payload = found
            if payload == b"[DONE]":
                self.done = True
                return chunks, None
            value = parse_data(payload)
            if isinstance(value, GatewayError):
                return chunks, value
            chunks.append(value)
        return chunks, None

    @staticmethod
    def _payload(event: bytes) -> bytes | GatewayError | None:
        data: list[bytes] = []
        for line in event.split(b"\n"):
            if not line or line[0] == 0x3A:  # empty, or a ":" comment
                continue
            name, _, value = line.partition(b":")
            if name not in _FIELDS:
                return UpstreamProtocolError(
                    "The engine sent a stream line that is not a server-sent event field."
                )
            if name == b"data":
                data.append(value[1:] if value[:1] == b" " else value)
        return b"\n".join(data) if data else None
