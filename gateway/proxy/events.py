"""An engine's server-sent events, split into whole events, checked and parsed once.

A client acts only on whole events, so holding back the bytes of an
unfinished event until its blank line arrives delays nothing it could use. In
exchange the gateway sees each event whole and can end a broken stream with an
error event the client can parse, instead of passing on a ``data:`` line that
is not JSON (openai-python raises a JSON decode error on it, not an APIError).
Line endings may be LF or CRLF; bare-CR framing is treated as unfinished.
"""

from __future__ import annotations

from typing import Any

import orjson
from orjson import JSONDecodeError
from orjson import loads as _loads

from gateway.errors import GatewayError, UpstreamError, UpstreamProtocolError
from gateway.proxy.engineerrors import engine_error_object

MAX_EVENT_BYTES = 1 << 20  # the largest real chunk (a long tool call) is far smaller
_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})
# Whole events' bytes, their parsed data payloads, and the failure that ends the stream.
_Read = tuple[bytes, list[Any], "GatewayError | None"]


class EngineStreamError(UpstreamError):
    """The engine itself sent an error event mid-stream (normalised, internals hidden)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error = error

    def openai_error(self) -> dict[str, Any]:
        return {"error": self.error}


def _length(events: list[bytes], count: int) -> int:
    """The length of the first ``count`` of ``events`` (split at their blank lines)."""
    return sum(map(len, events[:count])) + 2 * count


def _event_end(data: bytes) -> int:
    """Index just past the last blank line in ``data`` (0 if none)."""
    lf = data.rfind(b"\n\n")
    crlf = data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def parse_data(payload: bytes) -> dict[str, Any] | GatewayError:
    """An event's ``data`` as the chunk object it must be, or the failure that ends the
    stream: not JSON, not an object, or the engine's own error event."""
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return UpstreamProtocolError("The engine sent a stream event that is not valid JSON.")
    if not isinstance(value, dict):
        return UpstreamProtocolError("The engine sent a stream event that is not a JSON object.")
    if "error" in value:
        return EngineStreamError(engine_error_object(value, status=None))
    return value


class EventReader:
    """The one reader of an engine's stream: raw bytes in, whole checked events out.

    ``feed`` gives back, for what a chunk completes, the two things a route may
    need: the events' bytes, unchanged (a chat route passes them on as they are),
    and each ``data`` payload parsed (the usage, a translation, a trace read
    these: no event is parsed twice); and the error that ends the stream, if an
    event is broken or is the engine's own error (``data: {"error"}``, or
    llama.cpp's ``error:`` line). ``done`` turns true at ``data: [DONE]``.
    """

    __slots__ = ("_pending", "done")

    def __init__(self) -> None:
        self._pending = b""
        self.done = False

    @property
    def pending(self) -> bool:
        """Bytes of an unfinished event are held."""
        return bool(self._pending)

    def feed(self, chunk: bytes) -> tuple[bytes, list[Any], GatewayError | None]:
        """The whole events ``chunk`` completes (bytes and parsed data), and the failure."""
        if not self._pending and chunk[:6] == b"data: " and chunk.find(b"\n") == len(chunk) - 2:
            if chunk[-1:] == b"\n":
                # One whole plain event: engines send one per chunk, so this is
                # the stream's hot path (what _checked_simple does, for one event).
                payload = chunk[6:-2]
                try:
                    value = _loads(payload)
                except JSONDecodeError:
                    value = None
                if type(value) is dict and "error" not in value:
                    return chunk, [value], None
                if payload == b"[DONE]":
                    self.done = True
                    return chunk, [], None
                return b"", [], parse_data(payload)  # type: ignore[return-value]
        data = self._pending + chunk if self._pending else chunk
        end = _event_end(data)
        self._pending = data[end:]
        if len(self._pending) > MAX_EVENT_BYTES:
            self._pending = b""
            error = UpstreamProtocolError("The engine sent a stream event larger than 1 MiB.")
            return self._checked(data[:end], error)
        if not end:
            return b"", [], None
        return self._checked(data[:end], None)

    def _checked(self, block: bytes, tail_error: GatewayError | None) -> _Read:
        if b"\r" not in block:
            checked = self._checked_simple(block, tail_error)
            if checked is not None:
                return checked
        return self._checked_lines(block, tail_error)

    def _checked_simple(self, block: bytes, tail_error: GatewayError | None) -> _Read | None:
        # The shape every OpenAI-compatible engine sends: events of one
        # "data: " line each, LF line ends. Checked and parsed here in one pass,
        # without walking lines (the stream's hot path); None for anything else,
        # which the general walk below handles (it stops where this would: at
        # [DONE] or at a broken event, so stopping early agrees with it).
        events = block.split(b"\n\n")
        if events.pop():  # what follows the final blank line must be nothing
            return None
        done = events[-1] == b"data: [DONE]" if events else False
        if done:
            # The stream's end, looked for before parsing: a parse of it would fail
            # and make an exception (its message worked out in Python) per stream.
            events.pop()
        values: list[Any] = []
        append = values.append
        for event in events:
            if event[:6] != b"data: " or b"\n" in event:
                return None
            payload = event[6:]
            try:
                value = _loads(payload)
            except JSONDecodeError:
                value = None
            if type(value) is dict and "error" not in value:
                append(value)
                continue
            if payload == b"[DONE]":
                self.done = True
                self._pending = b""
                return block[: _length(events, len(values) + 1)], values, None
            return block[: _length(events, len(values))], values, parse_data(payload)  # type: ignore[return-value]
        if done:
            self.done = True
            self._pending = b""
            return block, values, None
        return block, values, tail_error

    def _checked_lines(self, block: bytes, tail_error: GatewayError | None) -> _Read:
        # ``block`` ends with a blank line: walk it line by line, remembering
        # where the last good event ended so only whole good events go out.
        good = 0
        pos = 0
        data: list[bytes] = []
        values: list[Any] = []
        for line in block.splitlines(keepends=True):
            pos += len(line)
            body = line.rstrip(b"\r\n")
            if not body:
                if data:
                    payload = b"\n".join(data)
                    data.clear()
                    if payload == b"[DONE]":
                        self.done = True
                        self._pending = b""
                        return block[:pos], values, None
                    parsed = parse_data(payload)
                    if isinstance(parsed, GatewayError):
                        return block[:good], values, parsed
                    values.append(parsed)
                good = pos
                continue
            if body[0] == 0x3A:  # ":" starts a comment
                continue
            name, colon, field = body.partition(b":")
            if name == b"error":
                # llama.cpp's server writes a failure as an ``error:`` line.
                return block[:good], values, _error_line(field[1:] if field[:1] == b" " else field)
            if name not in _FIELDS:
                return (
                    block[:good],
                    values,
                    UpstreamProtocolError(
                        "The engine sent a stream line that is not a server-sent event field."
                    ),
                )
            if name == b"data":
                data.append(field[1:] if field[:1] == b" " else field)
        return block[:good], values, tail_error


def _error_line(payload: bytes) -> GatewayError:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return EngineStreamError(engine_error_object(value, status=None))
    return UpstreamProtocolError("The engine failed in the middle of the stream.")
