"""n engine answers merged into the one OpenAI answer a request with ``n`` gets.

The fan-out (fanout.py) asks the engine once per choice; the client must see
what OpenAI sends for ``n``: one id, choices indexed 0..n-1, and usage that
counts the prompt once and sums the completions (OpenAI bills the prompt once
whatever ``n`` is). ``merge_answers`` does that for whole JSON answers,
``StreamMerge`` for the events of n streams as they arrive. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import UpstreamProtocolError

DONE = b"data: [DONE]\n\n"


def _int(value: Any) -> bool:
    return type(value) is int


def merge_usage(usages: list[Any]) -> dict[str, Any] | None:
    """One usage object for n answers: the first answer's ``prompt_tokens`` and
    ``prompt_tokens_details`` (the prompt is the same n times, and counted once),
    ``completion_tokens`` and the numeric ``completion_tokens_details`` summed,
    ``total_tokens`` their sum. None unless every answer has a usage object with
    integer token counts: a partial sum would be a wrong count."""
    if not usages or not all(
        isinstance(u, dict) and _int(u.get("prompt_tokens")) and _int(u.get("completion_tokens"))
        for u in usages
    ):
        return None
    first: dict[str, Any] = usages[0]
    merged = dict(first)
    prompt: int = first["prompt_tokens"]
    completion = sum(u["completion_tokens"] for u in usages)
    merged["completion_tokens"] = completion
    merged["total_tokens"] = prompt + completion
    details = [u.get("completion_tokens_details") for u in usages]
    if isinstance(details[0], dict):
        summed = dict(details[0])
        for key, value in details[0].items():
            if _int(value):
                summed[key] = sum(
                    d[key] for d in details if isinstance(d, dict) and _int(d.get(key))
                )
        merged["completion_tokens_details"] = summed
    return merged


def _answer_object(data: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError("The engine's answer is not valid JSON.") from None
    if not isinstance(value, dict) or not isinstance(value.get("choices"), list):
        raise UpstreamProtocolError("The engine's answer has no list of choices.")
    if not all(isinstance(c, dict) for c in value["choices"]):
        raise UpstreamProtocolError("The engine's answer has a choice that is not an object.")
    return value


def merge_answers(answers: list[bytes]) -> bytes:
    """The one answer for n engine answers (JSON bodies, in choice order): the first
    one's fields (``id``, ``object``, ``created``, ``model``, ``system_fingerprint``,
    ...), every answer's choices numbered 0, 1, ... in order, and ``merge_usage``.
    UpstreamProtocolError if an answer is not a JSON object with a list of choices."""
    parsed = [_answer_object(a) for a in answers]
    choices: list[dict[str, Any]] = []
    for answer in parsed:
        for choice in answer["choices"]:
            choice["index"] = len(choices)
            choices.append(choice)
    merged = parsed[0]
    merged["choices"] = choices
    if "usage" in merged:
        merged["usage"] = merge_usage([a.get("usage") for a in parsed])
    return orjson.dumps(merged)


def _payloads(block: bytes) -> list[tuple[bytes, bytes | None]]:
    """Each whole event of ``block`` (from EventSplitter, so already checked) with its
    ``data`` payload, or None for an event without data (a comment, a retry)."""
    if b"\r" in block:
        block = block.replace(b"\r\n", b"\n")
    out: list[tuple[bytes, bytes | None]] = []
    for event in block.split(b"\n\n"):
        if not event:
            continue
        if event[:6] == b"data: " and b"\n" not in event:
            out.append((event, event[6:]))  # what engines send: one data line
            continue
        data = []
        for line in event.split(b"\n"):
            name, _, value = line.partition(b":")
            if name == b"data":
                data.append(value[1:] if value[:1] == b" " else value)
        out.append((event, b"\n".join(data) if data else None))
    return out


class StreamMerge:
    """The events of n streams, rewritten as one stream while they arrive.

    ``rewrite(i, events)`` takes whole events of stream ``i`` (as EventSplitter gives
    them) and returns what the client gets: each chunk with its choices' ``index``
    set to ``i`` and one ``id`` and ``created`` for all (those of the first chunk
    the client got, whichever stream sent it); each stream's own ``data: [DONE]``
    and usage-only chunk (``choices: []`` with ``usage``) held back. ``end()``
    is the tail once every stream is done: with ``include_usage``, one usage chunk
    (stream 0's usage chunk with the merged usage), then one ``data: [DONE]``.
    """

    def __init__(self, n: int, *, include_usage: bool, hide_usage: bool = False) -> None:
        self.n = n
        self.include_usage = include_usage
        # The gateway asked for usage, the client did not: no "usage": null on chunks.
        self.hide_usage = hide_usage
        self.id: Any = None
        self.created: Any = None
        self._usages: list[Any] = [None] * n
        self._usage_chunk: dict[str, Any] | None = None
        self._extra: dict[tuple[int, Any], int] = {}

    def rewrite(self, index: int, events: bytes) -> bytes:
        """What the client gets for whole events of stream ``index`` (b"" if nothing)."""
        if events[:6] == b"data: " and events.find(b"\n") == len(events) - 2:
            # One whole plain event: engines send one per chunk (the hot path).
            data = events[6:-2]
            if data == b"[DONE]":
                return b""
            return self._rewrite_chunk(index, orjson.loads(data)) or b""
        out: list[bytes] = []
        for event, payload in _payloads(events):
            if payload is None:
                out.append(event + b"\n\n")
                continue
            if payload == b"[DONE]":
                continue
            chunk = self._rewrite_chunk(index, orjson.loads(payload))
            if chunk is not None:
                out.append(chunk)
        return b"".join(out)

    def _rewrite_chunk(self, index: int, chunk: dict[str, Any]) -> bytes | None:
        choices = chunk.get("choices")
        if type(choices) is list:
            if not choices and isinstance(chunk.get("usage"), dict):
                self._usages[index] = chunk["usage"]
                if self._usage_chunk is None or index == 0:
                    self._usage_chunk = chunk
                return None
            for choice in choices:
                if type(choice) is dict:
                    choice["index"] = self._index(index, choice.get("index"))
        if self.hide_usage and "usage" in chunk:
            del chunk["usage"]
        if self.id is None:
            self.id = chunk.get("id")
            self.created = chunk.get("created")
        else:
            if "id" in chunk:
                chunk["id"] = self.id
            if "created" in chunk:
                chunk["created"] = self.created
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _index(self, stream: int, index: Any) -> int:
        if index == 0 or type(index) is not int:
            return stream
        # A stream with more than one choice (an engine that did not take n out
        # of the request as asked): numbers past n, so no two choices share one.
        key = (stream, index)
        found = self._extra.get(key)
        if found is None:
            found = self._extra[key] = self.n + len(self._extra)
        return found

    @property
    def usages(self) -> list[Any]:
        """Each stream's usage object so far (None where it sent none)."""
        return self._usages

    def end(self) -> bytes:
        """The tail once every stream is done: the usage chunk if asked, then [DONE]."""
        if not self.include_usage or self._usage_chunk is None:
            return DONE
        usage = merge_usage(self._usages)
        if usage is None:
            return DONE
        chunk = self._usage_chunk
        if self.id is not None and "id" in chunk:
            chunk["id"] = self.id
        if self.created is not None and "created" in chunk:
            chunk["created"] = self.created
        chunk["usage"] = usage
        return b"data: " + orjson.dumps(chunk) + b"\n\n" + DONE
