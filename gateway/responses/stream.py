"""A chat-completions stream, chunk by chunk, as the Responses event sequence.

Each engine chunk becomes its events at once (nothing is held back):
``response.created`` and ``response.in_progress`` first, then per output item
``response.output_item.added``, for a message ``response.content_part.added``
and ``response.output_text.delta``s, for a function call
``response.function_call_arguments.delta``s, each item closed (``.done`` events)
before the next opens, and at the engine's ``[DONE]`` ``response.completed`` or
``response.incomplete``. A failure becomes an ``error`` event and
``response.failed``. Every event is an ``event:`` line and a ``data:`` line with
a ``sequence_number``, and there is no ``[DONE]`` line: OpenAI's own framing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamProtocolError
from gateway.responses.shape import (
    call_item,
    finish_status,
    message_item,
    reasoning_item,
    reasoning_of,
    response_object,
    text_part,
    usage_of,
)

_DELTA_START = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":'
)
_DELTA_END = b',"logprobs":[]}\n\n'


class _Item:
    __slots__ = ("kind", "id", "index", "parts", "call_id", "name", "chat_index", "delta_head")

    def __init__(self, kind: str, item_id: str, index: int) -> None:
        self.kind = kind
        self.id = item_id
        self.index = index
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.chat_index = -1
        # The bytes of a text delta event after its sequence number, up to the delta:
        # the stream's hot path writes each delta event without building a dict.
        self.delta_head = b',"item_id":"%s","output_index":%d,"content_index":0,"delta":' % (
            item_id.encode(),
            index,
        )

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def done(self, status: str) -> dict[str, Any]:
        if self.kind == "message":
            return message_item(self.id, self.text, status=status)
        if self.kind == "reasoning":
            return reasoning_item(self.id, self.text, status=status)
        return call_item(self.id, self.call_id, self.name, self.text, status=status)


class StreamTranslator:
    """Turns chat chunks into Responses events; ``final`` is the finished response."""

    def __init__(
        self,
        response_id: str,
        request: dict[str, Any],
        *,
        created_at: float,
        new_id: Callable[[str], str],
        stored: bool,
    ) -> None:
        self.response_id = response_id
        self.request = request
        self.created_at = created_at
        self.new_id = new_id
        self.stored = stored
        self.sequence = 0
        self.items: list[_Item] = []
        self.output: list[dict[str, Any]] = []
        self.open: _Item | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.chat_usage: Any = None  # the engine's own usage object, for metering
        self.final: dict[str, Any] | None = None
        # The response's system_fingerprint: the gateway's, or the engine's own, read from
        # its first chunk (an engine that sends one sends it on every chunk).
        self.fingerprint: str | None = None
        self._first_chunk = True

    def _event(self, kind: str, data: dict[str, Any]) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        response = response_object(
            self.response_id,
            self.request,
            created_at=self.created_at,
            status=status,
            output=list(self.output),
            stored=self.stored,
            **extra,
        )
        if self.fingerprint is not None:
            response["system_fingerprint"] = self.fingerprint
        return response

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        head = orjson.dumps(self._response("in_progress"))  # the same object twice: one dump
        return self._with_response("response.created", head) + self._with_response(
            "response.in_progress", head
        )

    def _with_response(self, kind: str, response: bytes) -> bytes:
        name = kind.encode()
        sequence = self.sequence
        self.sequence += 1
        return b'event: %s\ndata: {"type":"%s","sequence_number":%d,"response":%s}\n\n' % (
            name,
            name,
            sequence,
            response,
        )

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """The events for one chat chunk (often one delta event, or none)."""
        if self._first_chunk:
            self._first_chunk = False
            own = chunk.get("system_fingerprint")
            if isinstance(own, str):
                self.fingerprint = own
        choices = chunk.get("choices")
        item = self.open
        if (
            item is not None
            and item.kind == "message"
            and type(choices) is list
            and len(choices) == 1
            and not chunk.get("usage")
        ):
            # The common chunk: one choice whose delta is text, to the open message.
            choice = choices[0]
            if type(choice) is dict and not choice.get("finish_reason"):
                delta = choice.get("delta")
                if (
                    type(delta) is dict
                    and "tool_calls" not in delta
                    and delta.get("reasoning_content") is None
                    and delta.get("reasoning") is None
                ):
                    content = delta.get("content")
                    if type(content) is str and content:
                        item.parts.append(content)
                        sequence = self.sequence
                        self.sequence = sequence + 1
                        return b"%s%d%s%s%s" % (
                            _DELTA_START,
                            sequence,
                            item.delta_head,
                            orjson.dumps(content),
                            _DELTA_END,
                        )
        out = b""
        usage = chunk.get("usage")
        if usage:
            self.chat_usage = usage
            self.usage = usage_of(usage)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices[0], dict):
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        reasoning = reasoning_of(delta)
        if reasoning is not None:
            out += self._reasoning(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            out += self._text(content)
        for call in delta.get("tool_calls") or ():
            out += self._call(call)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return out

    def _text(self, delta: str) -> bytes:
        out = b""
        item = self.open
        if item is None or item.kind != "message":
            out += self._close()
            item, opened = self._open_message()
            out += opened
        item.parts.append(delta)
        sequence = self.sequence
        self.sequence += 1
        return out + b"%s%d%s%s%s" % (
            _DELTA_START,
            sequence,
            item.delta_head,
            orjson.dumps(delta),
            _DELTA_END,
        )

    def _reasoning(self, delta: str) -> bytes:
        out = b""
        item = self.open
        if item is None or item.kind != "reasoning":
            out += self._close()
            item = self._open("reasoning", self.new_id("rs"))
            added = reasoning_item(item.id, "", status="in_progress") | {"content": []}
            out += self._event(
                "response.output_item.added", {"output_index": item.index, "item": added}
            )
        item.parts.append(delta)
        return out + self._event(
            "response.reasoning_text.delta",
            {"item_id": item.id, "output_index": item.index, "content_index": 0, "delta": delta},
        )

    def _open_message(self) -> tuple[_Item, bytes]:
        item = self._open("message", self.new_id("msg"))
        added = message_item(item.id, "", status="in_progress") | {"content": []}
        out = self._event("response.output_item.added", {"output_index": item.index, "item": added})
        out += self._event(
            "response.content_part.added",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": 0,
                "part": text_part(""),
            },
        )
        return item, out

    def _call(self, call: dict[str, Any]) -> bytes:
        out = b""
        index = call.get("index", 0)
        item = self.open
        function = call.get("function") or {}
        if item is None or item.kind != "function_call" or item.chat_index != index:
            if any(i.kind == "function_call" and i.chat_index == index for i in self.items):
                raise UpstreamProtocolError(
                    "The engine's stream went back to a tool call it had finished."
                )
            out += self._close()
            item = self._open("function_call", self.new_id("fc"))
            item.chat_index = index
            item.call_id = str(call.get("id") or self.new_id("call"))
            item.name = str(function.get("name") or "")
            out += self._event(
                "response.output_item.added",
                {"output_index": item.index, "item": item.done("in_progress")},
            )
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item.parts.append(arguments)
            out += self._event(
                "response.function_call_arguments.delta",
                {"item_id": item.id, "output_index": item.index, "delta": arguments},
            )
        return out

    def _open(self, kind: str, item_id: str) -> _Item:
        item = _Item(kind, item_id, len(self.items))
        self.items.append(item)
        self.open = item
        return item

    def _close(self, status: str = "completed") -> bytes:
        item = self.open
        if item is None:
            return b""
        self.open = None
        where = {"item_id": item.id, "output_index": item.index}
        if item.kind == "message":
            out = self._event(
                "response.output_text.done",
                where | {"content_index": 0, "text": item.text, "logprobs": []},
            )
            out += self._event(
                "response.content_part.done",
                where | {"content_index": 0, "part": text_part(item.text)},
            )
        elif item.kind == "reasoning":
            out = self._event(
                "response.reasoning_text.done", where | {"content_index": 0, "text": item.text}
            )
        else:
            out = self._event(
                "response.function_call_arguments.done", where | {"arguments": item.text}
            )
        done = item.done(status)
        self.output.append(done)
        return out + self._event(
            "response.output_item.done", {"output_index": item.index, "item": done}
        )

    def finish(self) -> bytes:
        """The engine's stream ended well: close the open item, then the response."""
        status, incomplete = finish_status(self.finish_reason)
        out = b""
        if not any(item.kind != "reasoning" for item in self.items):
            # An empty answer is still one (empty) message, as in the whole answer.
            out += self._close()
            out += self._open_message()[1]
        out += self._close("incomplete" if status == "incomplete" else "completed")
        self.final = self._response(status, usage=self.usage, incomplete=incomplete)
        return out

    def final_event(self, final: dict[str, Any]) -> bytes:
        """``response.completed`` (or ``.incomplete``) for the finished ``final``: sent
        once the response is stored, so the id is usable when the client sees it."""
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return self._with_response(kind, orjson.dumps(final))

    def fail(self, exc: GatewayError) -> bytes:
        """An ``error`` event and ``response.failed`` for a stream that broke."""
        out = b""
        if self.open is not None:
            out += self._close("incomplete")
        error = exc.openai_error()["error"]
        out += self._event(
            "error",
            {
                "code": error.get("code"),
                "message": error.get("message", ""),
                "param": error.get("param"),
            },
        )
        failed = self._response(
            "failed",
            usage=self.usage,
            error={"code": "server_error", "message": str(error.get("message", ""))},
        )
        return out + self._event("response.failed", {"response": failed})
