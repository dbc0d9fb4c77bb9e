"""POST /v1/messages and /v1/messages/count_tokens in native mode: the engine's own routes,
under the policy.

The request is checked by the same policy route and forwarded as the client
sent it (``?beta=true`` and the ``anthropic-version``/``anthropic-beta``
headers with it, verbatim); what the engine gets wrong that the probe measured
is refused by the policy (``ft-gateway probe --route messages`` writes it),
and what the answer itself tells is mended exactly, whole and streamed:

- an id that is not a message id (llama.cpp's server sends ``chatcmpl-...``)
  becomes ``msg_...``;
- ``stop_reason: "end_turn"`` with a ``stop_sequence`` (llama.cpp's server,
  when a stop sequence matched) becomes ``"stop_sequence"``.

A stream is relayed event by event until ``message_stop`` (an older vLLM's
``data: [DONE]`` is not passed on: Anthropic's framing has none); one that breaks
before it ends with an ``event: error`` in Anthropic's shape. Errors, the
engine's included, are Anthropic's (errors.py). Where the policy's ``answers:`` check
answers, a whole answer is checked (schemas/answers.py's check_message) before it is
sent, and a stream at its end (CheckedNativeStream: the end held until it passes).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError
from gateway.limits.meter import Usage
from gateway.messages.call import MessagesCall
from gateway.messages.errors import ANTHROPIC_ERRORS
from gateway.messages.shape import new_id
from gateway.observe.exchange import Exchange
from gateway.policy.engine import Decision
from gateway.proxy.answercheck import enforce, judge
from gateway.proxy.call import Call
from gateway.proxy.route import Route
from gateway.routes import COUNT_TOKENS, MESSAGES, ROUTES
from gateway.schemas.answers import check_message
from gateway.schemas.expect import Expectation


def anthropic_usage(usage: Any) -> Usage | None:
    """The tokens of an Anthropic usage object: the prompt is ``input_tokens`` and the
    cached tokens beside it (Anthropic counts them apart)."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("input_tokens")
    completion = usage.get("output_tokens")
    if type(prompt) is not int or type(completion) is not int:
        return None
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        cached = usage.get(key)
        if type(cached) is int:
            prompt += cached
    return Usage(prompt, completion, prompt + completion)


def mend_message(message: dict[str, Any]) -> bool:
    """Mend a message object (a whole answer, or message_start's) in place: its id.
    Whether anything changed."""
    own = message.get("id")
    if isinstance(own, str) and own.startswith("msg_"):
        return False
    message["id"] = new_id("msg")
    return True


def mend_stop(holder: dict[str, Any]) -> bool:
    """Mend a stop_reason in place (a whole answer, or message_delta's delta): a
    matched ``stop_sequence`` said beside ``end_turn`` is a ``stop_sequence`` stop."""
    if holder.get("stop_reason") == "end_turn" and isinstance(holder.get("stop_sequence"), str):
        holder["stop_reason"] = "stop_sequence"
        return True
    return False


class NativeStream:
    """A Messages stream from the engine, passed on event by event, mended."""

    __slots__ = ("ended", "prompt", "completion")

    def __init__(self) -> None:
        self.ended = False
        self.prompt: int | None = None
        self.completion: int | None = None

    @property
    def usage(self) -> Usage | None:
        if self.prompt is None or self.completion is None:
            return None
        return Usage(self.prompt, self.completion, self.prompt + self.completion)

    def start(self) -> bytes:
        return b""

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        out = []
        for data in chunks:
            kind = data.get("type")
            if kind == "message_start" and isinstance(data.get("message"), dict):
                message = data["message"]
                mend_message(message)
                self._count(message.get("usage"))
            elif kind == "message_delta":
                if isinstance(data.get("delta"), dict):
                    mend_stop(data["delta"])
                self._count(data.get("usage"))
            elif kind == "message_stop":
                self.ended = True
            name = kind.encode() if isinstance(kind, str) else b"message"
            out.append(b"event: %s\ndata: %s\n\n" % (name, orjson.dumps(data)))
        return b"".join(out)

    def _count(self, usage: Any) -> None:
        # message_start's usage, then message_delta's: cumulative, so the last one wins.
        if not isinstance(usage, dict):
            return
        if type(usage.get("input_tokens")) is int:
            found = anthropic_usage({**usage, "output_tokens": 0})
            self.prompt = found.prompt if found is not None else None
        if type(usage.get("output_tokens")) is int:
            self.completion = usage["output_tokens"]

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        return b"", None

    def fail(self, exc: GatewayError) -> bytes:
        return ANTHROPIC_ERRORS.event(exc)


class CheckedNativeStream(NativeStream):
    """An engine's own Messages stream whose answer is checked as it ends: events relayed
    as they come but the end (``message_delta``, ``message_stop``) held until the blocks
    put together (text deltas, ``input_json_delta`` pieces) pass the checks."""

    __slots__ = ("expect", "record", "blocks", "pieces", "stop_reason", "held")

    def __init__(self, expect: Expectation, record: Exchange) -> None:
        super().__init__()
        self.expect = expect
        self.record = record
        self.blocks: dict[Any, dict[str, Any]] = {}
        self.pieces: dict[Any, list[str]] = {}
        self.stop_reason: Any = None
        self.held: list[bytes] = []

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        out = super().events(raw, chunks, done=done)
        for data in chunks:
            self._read(data)
        if self.held or not any(_ends(data) for data in chunks):
            if self.held:
                self.held.append(out)
                return b""
            return out
        # The end came in this read: what precedes it goes now, the rest is held.
        cut = out.find(b"event: message_delta\n")
        if cut < 0:
            cut = out.find(b"event: message_stop\n")
        self.held.append(out[cut:])
        return out[:cut]

    def _read(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        index = data.get("index")
        if kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self.blocks[index] = dict(data["content_block"])
            self.pieces[index] = []
        elif kind == "content_block_delta" and index in self.blocks:
            delta = data.get("delta")
            if isinstance(delta, dict):
                piece = delta.get("text", delta.get("partial_json"))
                if isinstance(piece, str):
                    self.pieces[index].append(piece)
        elif kind == "message_delta" and isinstance(data.get("delta"), dict):
            self.stop_reason = data["delta"].get("stop_reason")

    def message(self) -> dict[str, Any]:
        """The answer so far as a whole message (what check_message reads)."""
        content = []
        for index, block in self.blocks.items():
            text = "".join(self.pieces[index])
            if block.get("type") == "text":
                block = {**block, "text": block.get("text", "") + text}
            elif block.get("type") == "tool_use" and text:
                try:
                    block = {**block, "input": orjson.loads(text)}
                except orjson.JSONDecodeError:
                    block = {**block, "input": text}  # (its check says: not JSON)
            content.append(block)
        return {"content": content, "stop_reason": self.stop_reason}

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        held, self.held = b"".join(self.held), []
        enforced = judge(self.record, check_message(self.expect, self.message()))
        if enforced is not None:
            return b"", enforced
        tail, failure = await super().finish()
        return held + tail, failure


def _ends(data: Any) -> bool:
    return isinstance(data, dict) and data.get("type") in ("message_delta", "message_stop")


class NativeMessages(Route):
    """Forwards POST /v1/messages to the engine's own Messages route."""

    row = ROUTES[MESSAGES]
    call_type = MessagesCall

    def usage(self, answer: dict[str, Any]) -> Usage | None:
        return anthropic_usage(answer.get("usage"))

    def decide(self, call: Call, body: dict[str, Any]) -> Decision:
        decision = super().decide(call, body)
        # What a whole answer is checked against (None: nothing, on most requests).
        call.plan = decision.expect
        return decision

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        if not isinstance(answer, dict) or answer.get("type") != "message":
            return None
        if call.plan is not None:
            enforce(call.record, check_message(call.plan, answer))
        mended = mend_message(answer)
        mended = mend_stop(answer) or mended
        return (headers, orjson.dumps(answer)) if mended else None

    def shaper(self, call: Call) -> NativeStream:
        if call.plan is not None:
            return CheckedNativeStream(call.plan, call.record)
        return NativeStream()


class NativeCount(Route):
    """Forwards POST /v1/messages/count_tokens to the engine's own: no model runs, so
    nothing is metered."""

    row = ROUTES[COUNT_TOKENS]
    call_type = MessagesCall

    def usage(self, answer: dict[str, Any]) -> Usage | None:
        return Usage(0, 0, 0)
