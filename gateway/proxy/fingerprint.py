"""Putting ``system_fingerprint`` (gateway/policy/fingerprint.py) into the answers.

The answers are stamped as bytes, without parsing them: a whole answer or each event
of a stream gets the member inserted after its opening brace, or its ``null`` replaced;
an engine's own value is left alone. A relayed stream block costs one ``bytes.replace``
when its events lack the member (the reader's parsed chunks say whether they do), and a
few substring scans where the caller has no parse.
"""

from __future__ import annotations

import re
from typing import Any

_KEY = b'"system_fingerprint"'
_NULL = re.compile(rb'"system_fingerprint"\s*:\s*null')
_PLAIN_START = b'data: {"'
_ERROR_EVENT = b'data: {"error"'
_DONE = b"data: [DONE]"
_EVENT = re.compile(rb"(?m)^data: ?\{(?=\s*\")(?!\s*\"error\")")


def _member(value: bytes) -> bytes:
    return b'"system_fingerprint":"' + value + b'",'


def stamp_answer(data: bytes, value: bytes, answer: dict[str, Any] | None = None) -> bytes:
    """A whole JSON answer with ``system_fingerprint`` set, unless the engine set it;
    ``answer``: ``data`` parsed, where the caller has it (then the member's absence
    is read from it, not searched for in the bytes)."""
    if answer and "system_fingerprint" not in answer:
        start = data.find(b"{") + 1  # a JSON object: its first brace opens it
        return data[:start] + b'"system_fingerprint":"' + value + b'",' + data[start:]
    if _KEY in data:
        return _NULL.sub(b'"system_fingerprint":"' + value + b'"', data, count=1)
    start = data.find(b"{")
    quote = data.find(b'"', start)
    if start < 0 or quote < 0 or data[:start].strip() or data[start + 1 : quote].strip():
        return data  # not an object, or an empty one
    return data[: start + 1] + b'"system_fingerprint":"' + value + b'",' + data[start + 1 :]


def stamp_events(events: bytes, value: bytes, chunks: list[Any] | None = None) -> bytes:
    """Whole SSE events (``data: {...}`` chunks) with ``system_fingerprint`` in each
    chunk that lacks it; error events and ``[DONE]`` are left as they are. ``chunks``:
    the parsed data of ``events``' chunk events (an error event and ``[DONE]`` not
    among them), where the caller has them (the stream's reader parsed them): then
    whether the engine sent the member is read from them, and the replace's own length
    says whether each chunk got its one, with no scan of the bytes."""
    new = b'data: {"system_fingerprint":"' + value + b'","'
    if chunks is not None:
        for chunk in chunks:
            if "system_fingerprint" in chunk:
                return _stamp_each(events, value)
        # The common case, as engines write events: one C-level replace, no parse.
        # Each replacement adds the same length, so the length says how many were
        # made: one per chunk event (a "data: {\"" elsewhere would be inside a JSON
        # string, where its quote is escaped).
        stamped = events.replace(_PLAIN_START, new)
        if len(stamped) - len(events) == len(chunks) * (len(new) - len(_PLAIN_START)):
            return stamped
        return _EVENT.sub(lambda m: m.group(0) + _member(value), events)
    if _KEY in events:
        return _stamp_each(events, value)
    plain = events.count(_PLAIN_START)
    if _ERROR_EVENT not in events and plain == events.count(b"data:") - events.count(_DONE):
        return events.replace(_PLAIN_START, new)
    return _EVENT.sub(lambda m: m.group(0) + _member(value), events)


def _stamp_each(events: bytes, value: bytes) -> bytes:
    """Events of which some carry the key (the engine's own value, or null)."""
    out = []
    for event in events.split(b"\n\n"):
        if _KEY in event:
            out.append(_NULL.sub(b'"system_fingerprint":"' + value + b'"', event, count=1))
        else:
            out.append(_EVENT.sub(lambda m: m.group(0) + _member(value), event))
    return b"\n\n".join(out)
