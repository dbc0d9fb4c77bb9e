"""A chat-completions stream, chunk by chunk, as the Messages API's event sequence.

Each engine chunk becomes its events at once (nothing is held back but the tail
of text that could still begin ``</think>`` or a stop sequence: text.py):
``message_start`` (the message with no content and ``stop_reason: null``) and a
``ping`` first, then per content block ``content_block_start`` with its
``index`` (its place in the final content), its ``content_block_delta``\\ s
(``thinking_delta``, ``text_delta``, a tool call's ``input_json_delta``), and
``content_block_stop`` before the next block opens; at the engine's ``[DONE]``
one ``message_delta`` (the stop reason, the matched stop sequence, the usage:
cumulative, as Anthropic's are, and the prompt's count too, which
``message_start`` could not know yet) and ``message_stop``. A failure once the
answer has started is an ``event: error`` in Anthropic's shape (the SDKs raise
on it). Every event is an ``event:`` line and a ``data:`` line whose ``type``
is the event's name, and there is no ``[DONE]``: Anthropic's framing.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamProtocolError
from gateway.limits.meter import Usage
from gateway.limits.meter import usage_of as meter_usage
from gateway.messages.errors import ANTHROPIC_ERRORS
from gateway.messages.shape import new_id, stop_reason, thinking_block, tool_input, usage_of
from gateway.messages.text import THINKING, InlineThinking, StopMatcher
from gateway.messages.translate import Wants
from gateway.responses.onecall import FirstCallFilter
from gateway.responses.shape import reasoning_of

_TEXT_DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"text_delta","text":%s}}\n\n'
)


def event(kind: str, data: dict[str, Any]) -> bytes:
    """One event: ``event: kind`` and its data, whose ``type`` is ``kind``."""
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), orjson.dumps({"type": kind, **data}))


class MessageStream:
    """Turns chat chunks into the Messages API's events (a StreamShaper)."""

    def __init__(self, message_id: str, model: str, wants: Wants) -> None:
        self.message_id = message_id
        self.model = model
        self.wants = wants
        self.ended = False
        self.blocks = 0  # blocks opened so far: the next one's index
        self.open: str | None = None  # the open block's type
        self.call_index: Any = None  # the open tool_use block's chat tool-call index
        self.call_name = ""
        self.arguments: list[str] = []
        self.tool_use = False
        self.inline = InlineThinking() if wants.thinking else None
        self.stops = StopMatcher(wants.stops)
        self.first_call = FirstCallFilter() if wants.one_call else None
        # No thought to split off (or its text block reached) and no stop sequences:
        # a text delta goes out as it is.
        self.plain = not wants.stops and not wants.thinking
        self.finish_reason: Any = None
        self.chat_usage: Any = None  # the engine's own usage object (metering reads it)

    @property
    def usage(self) -> Usage | None:
        return meter_usage(self.chat_usage)

    def start(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return event("message_start", {"message": message}) + event("ping", {})

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        self.ended = done
        if len(chunks) == 1:
            return self.chunk(chunks[0])
        return b"".join([self.chunk(c) for c in chunks])

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """The events of one chat chunk (often one delta, or none)."""
        if self.plain and self.open == "text" and not chunk.get("usage"):
            # The common chunk: one choice whose delta is text, to the open text block,
            # with no thought to split off and no stop sequence to look for.
            choices = chunk.get("choices")
            if type(choices) is list and len(choices) == 1:
                choice = choices[0]
                if type(choice) is dict and not choice.get("finish_reason"):
                    delta = choice.get("delta")
                    if (
                        type(delta) is dict
                        and len(delta) == 1
                        and type(delta.get("content")) is str
                        and self.first_call is None
                    ):
                        return _TEXT_DELTA % (self.blocks - 1, orjson.dumps(delta["content"]))
        usage = chunk.get("usage")
        if usage:
            self.chat_usage = usage
        choices = chunk.get("choices")
        if not choices or not isinstance(choices[0], dict):
            return b""
        if self.first_call is not None:
            chunk = self.first_call(chunk)
        choice = chunk["choices"][0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict) or self.stops.matched is not None:
            return b""
        out = b""
        reasoning = reasoning_of(delta)
        if reasoning is not None:
            out += self._thinking(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self.inline is None:
                out += self._text(content)
            else:
                for kind, piece in self.inline.feed(content):
                    out += self._thinking(piece) if kind == THINKING else self._text(piece)
        for call in delta.get("tool_calls") or ():
            if self.stops.matched is None and isinstance(call, dict):
                out += self._call(call)
        return out

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.open = kind
        out += event("content_block_start", {"index": self.blocks, "content_block": block})
        self.blocks += 1
        return out

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        if self.open == "tool_use":
            tool_input(self.call_name, "".join(self.arguments))  # a 502 if not an object
            self.arguments = []
        self.open = None
        return event("content_block_stop", {"index": self.blocks - 1})

    def _thinking(self, piece: str) -> bytes:
        out = b""
        if self.open != "thinking":
            out += self._open("thinking", thinking_block("", show=True))
        if self.wants.show_thinking:
            out += event(
                "content_block_delta",
                {"index": self.blocks - 1, "delta": {"type": "thinking_delta", "thinking": piece}},
            )
        return out

    def _text(self, piece: str) -> bytes:
        text = self.stops.feed(piece)
        out = b""
        if text:
            if self.open != "text":
                out += self._open("text", {"type": "text", "text": ""})
            out += _TEXT_DELTA % (self.blocks - 1, orjson.dumps(text))
        if self.stops.matched is not None:
            out += self._close()
        return out

    def _call(self, call: dict[str, Any]) -> bytes:
        out = b""
        index = call.get("index", 0)
        function = call.get("function") or {}
        if self.open != "tool_use" or self.call_index != index:
            out += self._flush()
            self.call_name = str(function.get("name") or "")
            block = {"type": "tool_use", "id": new_id("toolu"), "name": self.call_name, "input": {}}
            out += self._open("tool_use", block)
            self.call_index = index
            self.tool_use = True
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self.arguments.append(arguments)
            out += event(
                "content_block_delta",
                {
                    "index": self.blocks - 1,
                    "delta": {"type": "input_json_delta", "partial_json": arguments},
                },
            )
        return out

    def _flush(self) -> bytes:
        """The text still held back (a tail that did not become a stop sequence)."""
        out = b""
        if self.inline is not None:
            for kind, piece in self.inline.finish():
                out += self._thinking(piece) if kind == THINKING else self._text(piece)
        held = self.stops.finish()
        if held:
            if self.open != "text":
                out += self._open("text", {"type": "text", "text": ""})
            out += _TEXT_DELTA % (self.blocks - 1, orjson.dumps(held))
        return out

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        try:
            out = self._flush() + self._close()
        except UpstreamProtocolError as exc:
            return b"", exc
        matched = self.stops.matched
        reason = stop_reason(self.finish_reason, matched=matched, tool_use=self.tool_use)
        delta = {"stop_reason": reason, "stop_sequence": matched}
        out += event("message_delta", {"delta": delta, "usage": usage_of(self.chat_usage)})
        return out + event("message_stop", {}), None

    def fail(self, exc: GatewayError) -> bytes:
        return ANTHROPIC_ERRORS.event(exc)
