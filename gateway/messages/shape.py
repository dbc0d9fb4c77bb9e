"""The Messages API's answer, from a chat completion: its ids, blocks, stop reason, usage.

A whole answer is ``{id: "msg_...", type: "message", role: "assistant",
content, model, stop_reason, stop_sequence, usage}``. Blocks: a thinking block
first where the engine reasoned (its ``reasoning_content``, or a leading
``<think>`` block of the text when the request asked for thinking: text.py),
the text (cut before a matched stop sequence), a ``tool_use`` block per tool
call with a ``toolu_`` id and the arguments parsed (an engine's arguments that
are not a JSON object are a 502, never an ``input: {}`` that hides them).

A thinking block's ``signature`` is empty: Anthropic's signs the thought with
Anthropic's keys, so the API can check a block sent back is unmodified; no
gateway can make that signature, and none is needed here, as a thought sent
back is left out of the engine's prompt (blocks.py). An empty string claims
nothing.

``stop_reason``: ``stop_sequence`` when the gateway matched one; the engine's
``length`` is ``max_tokens``; an answer that ends in tool calls is
``tool_use``; ``content_filter`` is ``refusal``; anything else ``end_turn``.
Usage as Anthropic counts it: ``input_tokens`` without the cached prompt tokens
(``cache_read_input_tokens``, where the engine reports them), so that their sum
is the whole prompt, and ``output_tokens`` every token the engine generated.
"""

from __future__ import annotations

import os
import random
import string
from typing import Any

import orjson

from gateway.errors import UpstreamProtocolError
from gateway.messages.text import TEXT, THINKING, InlineThinking, StopMatcher
from gateway.messages.translate import Wants
from gateway.responses.shape import reasoning_of

# Ids are unique, not secret: a generator seeded from the OS, reseeded in a forked worker.
_IDS = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _IDS.seed(os.urandom(32)))
_ALPHABET = string.ascii_letters + string.digits


def new_id(prefix: str) -> str:
    """An Anthropic-style id: ``msg_01`` or ``toolu_01`` and 22 letters and digits."""
    return f"{prefix}_01" + "".join(_IDS.choices(_ALPHABET, k=22))


def stop_reason(finish_reason: Any, *, matched: str | None, tool_use: bool) -> str:
    """Anthropic's stop_reason for an engine's ``finish_reason``."""
    if matched is not None:
        return "stop_sequence"
    if finish_reason == "length":
        return "max_tokens"
    if tool_use:
        return "tool_use"
    if finish_reason == "content_filter":
        return "refusal"
    return "end_turn"


def usage_of(usage: Any) -> dict[str, Any]:
    """An engine's chat usage as Anthropic's (zeros where the engine said nothing)."""
    if not isinstance(usage, dict):
        return {"input_tokens": 0, "output_tokens": 0}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    prompt = prompt if type(prompt) is int else 0
    out: dict[str, Any] = {"input_tokens": prompt, "output_tokens": 0}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if type(cached) is int and 0 <= cached <= prompt:
        out["input_tokens"] = prompt - cached
        out["cache_creation_input_tokens"] = 0
        out["cache_read_input_tokens"] = cached
    out["output_tokens"] = completion if type(completion) is int else 0
    return out


def tool_input(name: str, arguments: Any) -> dict[str, Any]:
    """A tool call's arguments (a JSON string) as the tool_use block's ``input``."""
    if arguments in (None, ""):
        return {}
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str) else arguments
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise UpstreamProtocolError(
            f"The engine's call of tool '{name}' has arguments that are not a JSON object."
        )
    return value


def thinking_block(text: str, *, show: bool) -> dict[str, Any]:
    """A thinking block (``show`` False: display "omitted", the thought left out)."""
    return {"type": "thinking", "thinking": text if show else "", "signature": ""}


def split_text(text: str, wants: Wants) -> tuple[str, str, str | None]:
    """A whole answer's (thought, text, matched stop sequence)."""
    thought, answer = [], []
    if wants.thinking:
        inline = InlineThinking()
        pieces = inline.feed(text) + inline.finish()
    else:
        pieces = [(TEXT, text)]
    stops = StopMatcher(wants.stops)
    for kind, piece in pieces:
        if kind == THINKING:
            thought.append(piece)
        else:
            answer.append(stops.feed(piece))
    answer.append(stops.finish())
    return "".join(thought), "".join(answer), stops.matched


def message_object(
    chat: dict[str, Any], *, message_id: str, model: str, wants: Wants
) -> dict[str, Any]:
    """The Messages API's answer to a whole chat completion ``chat``."""
    choices = chat.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise UpstreamProtocolError("The engine's answer has no message.")
    message = choice["message"]
    content: list[dict[str, Any]] = []
    reasoning = reasoning_of(message)
    text = message.get("content")
    thought, text, matched = split_text(text if isinstance(text, str) else "", wants)
    if reasoning is not None:
        thought = reasoning + thought
    if thought:
        content.append(thinking_block(thought, show=wants.show_thinking))
    if text:
        content.append({"type": "text", "text": text})
    calls = message.get("tool_calls") if matched is None else None
    for call in (calls or ())[: 1 if wants.one_call else None]:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise UpstreamProtocolError("The engine's answer has a tool call without a function.")
        name = str(function.get("name") or "")
        block: dict[str, Any] = {"type": "tool_use", "id": new_id("toolu"), "name": name}
        block["input"] = tool_input(name, function.get("arguments"))
        content.append(block)
    own = chat.get("model")
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": own if isinstance(own, str) else model,
        "content": content,
        "stop_reason": stop_reason(
            choice.get("finish_reason"),
            matched=matched,
            tool_use=any(b["type"] == "tool_use" for b in content),
        ),
        "stop_sequence": matched,
        "usage": usage_of(chat.get("usage")),
    }
