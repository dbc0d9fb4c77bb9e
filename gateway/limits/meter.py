"""Token metering: the engine's ``usage``, read from whole answers and streams.

A whole answer carries ``usage`` at its top level. A stream carries it only
when asked (``stream_options.include_usage``): one last chunk with
``choices: []`` and the usage, and, as OpenAI does, ``"usage": null`` on every
other chunk. When the gateway asked and the client did not (``hide``),
``StreamMeter`` removes both from what the client gets, as bytes: the null is
cut out of the event's JSON text (the rest of the event is untouched, so the
client gets exactly what the engine sends without include_usage) and the
usage chunk is dropped.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

_KEY = b'"usage"'
_COMPACT_NULL = b',"usage":null'
_NULL_AFTER = re.compile(rb'\s*,\s*"usage"\s*:\s*null(?=\s*[,}])')
_NULL_BEFORE = re.compile(rb'"usage"\s*:\s*null\s*,\s*')


class Usage(NamedTuple):
    """Tokens of one request, as the engine counted them (a tuple: built on every
    answer, it costs a third of a frozen dataclass)."""

    prompt: int
    completion: int
    total: int


def usage_of(value: Any) -> Usage | None:
    """A Usage from an OpenAI usage object (chat and completions' ``prompt_tokens`` and
    ``completion_tokens``, or the Responses API's ``input_tokens`` and ``output_tokens``);
    None unless its counts are integers. The one reader of usage: every route's, the
    limiter's, the metrics' and the trace's."""
    if not isinstance(value, dict):
        return None
    prompt = value.get("prompt_tokens")
    completion = value.get("completion_tokens")
    if prompt is None and completion is None:
        prompt = value.get("input_tokens")
        completion = value.get("output_tokens")
    if type(prompt) is not int or type(completion) is not int:
        return None
    total = value.get("total_tokens")
    return Usage(prompt, completion, total if type(total) is int else prompt + completion)


def total_usage(usages: list[Usage | None]) -> Usage | None:
    """The sum of several engine requests' usage (a fan-out's n); None if one has none.
    The engine read the prompt once per request, so it is counted n times here, though
    the client's merged usage counts it once as OpenAI does."""
    if not usages or any(u is None for u in usages):
        return None
    known = [u for u in usages if u is not None]
    return Usage(
        sum(u.prompt for u in known), sum(u.completion for u in known), sum(u.total for u in known)
    )


def answer_usage(data: bytes) -> Usage | None:
    """The usage of a whole JSON answer (None if it has none)."""
    if _KEY not in data:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return usage_of(value.get("usage")) if isinstance(value, dict) else None


def without_null_usage(payload: bytes) -> bytes:
    """``payload`` (one chunk's JSON) with its ``"usage": null`` member cut out."""
    if _COMPACT_NULL in payload:
        # As engines write it (compact JSON): a plain cut, a tenth of the regex's time.
        # Inside a JSON string the quotes would be escaped, so this is the member.
        return payload.replace(_COMPACT_NULL, b"", 1)
    cut, count = _NULL_AFTER.subn(b"", payload, count=1)
    if count:
        return cut
    return _NULL_BEFORE.sub(b"", payload, count=1)


class StreamMeter:
    """Reads the usage of a stream from its whole events (EventReader's bytes);
    with ``hide``, also removes what include_usage added."""

    def __init__(self, *, hide: bool) -> None:
        self.hide = hide
        self.usage: Usage | None = None

    def feed(self, block: bytes) -> bytes:
        """What the client gets of ``block``."""
        if _KEY not in block:
            return block
        # The usual chunk, as engines write it (compact JSON), with its one usage key
        # null: cut out in place, or nothing to count (a few scans, no parse).
        if self.hide:
            cut = block.replace(_COMPACT_NULL, b"", 1)
            if len(cut) != len(block) and _KEY not in cut:
                return cut
        elif _COMPACT_NULL in block and block.count(_KEY) == 1:
            return block
        if b"\r" in block:
            return self._event(block) if self.hide else self._read_only(block)
        if block.count(b"\n\n") == 1:  # one event: the hot path
            return self._event(block)
        events = block.split(b"\n\n")
        return b"".join(self._event(e + b"\n\n") for e in events[:-1])

    def _read_only(self, block: bytes) -> bytes:
        for line in block.splitlines():
            if line.startswith(b"data:") and _KEY in line:
                self._parse(line[5:].strip())
        return block

    def _parse(self, payload: bytes) -> dict[str, Any] | None:
        try:
            value = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(value, dict):
            return None
        usage = usage_of(value.get("usage"))
        if usage is not None:
            self.usage = usage
        return value

    def _event(self, event: bytes) -> bytes:
        if _KEY not in event:
            return event
        if event[:6] != b"data: " or event.find(b"\n") != len(event) - 2:
            return self._read_only(event)
        payload = event[6:-2]
        if self.hide and payload.count(_KEY) == 1:
            cut = without_null_usage(payload)
            if cut is not payload and len(cut) != len(payload):
                return b"data: " + cut + b"\n\n"
        value = self._parse(payload)
        if not self.hide or value is None or not isinstance(value.get("usage"), dict):
            return event
        if value.get("choices") == []:
            return b""  # the usage chunk the client did not ask for
        del value["usage"]  # usage on a chunk with choices (some engines): not byte-exact
        return b"data: " + orjson.dumps(value) + b"\n\n"
