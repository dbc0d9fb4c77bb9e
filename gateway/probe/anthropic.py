"""The probe of Anthropic's Messages API: does the engine serve /v1/messages natively, what
does its own route honour, and the Messages routes' rules the written policy holds.

Native (the plain request answers a ``message``): ``max_tokens``, a stream in
Anthropic's event sequence, ``stop_sequences`` (the text ends before the stop
sequence, and the answer says so: ``stop_reason: "stop_sequence"`` with the
sequence, or at least the sequence beside ``end_turn``, which the gateway mends
exactly: messages/native.py), ``thinking`` (adaptive: a thinking block comes back)
and ``count_tokens`` (the whole prompt the answer's usage counts) are measured on
the engine's own routes, and the policy says ``upstream.messages: native``. Not
native (404, or no message): the gateway translates onto chat completions, so each
sampling field follows the chat route's verdict, stop sequences pass (the gateway
matches them itself), and tools and ``output_config.format`` follow chat's verdicts
below the field (messages_rules.py). A native engine's tool calling is refused
until verified, as are images and documents, which the probe does not send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.messages.native import anthropic_usage
from gateway.probe.checks import stop_word
from gateway.probe.client import Answer, EngineClient
from gateway.probe.fields import PROBED, Rule
from gateway.probe.messages import SYSTEM_ROLE, TOOL_MESSAGE
from gateway.probe.messages_rules import (
    output_config_rule,
    tool_blocks,
    tool_choice_rule,
    tools_rule,
)
from gateway.probe.native import NativeProbe, describe, judged, route_head
from gateway.probe.route import CHAT
from gateway.probe.structured import StructuredProbe
from gateway.probe.structured_rules import SchemaAnchor, answers_rule, tools_honoured
from gateway.probe.verdict import (
    HONOURED,
    INCONCLUSIVE,
    REFUSED_BECAUSE,
    Verdict,
    quote,
    verdict_line,
)
from gateway.probe.yamltext import comment, entry_lines, flow
from gateway.routes import COUNT_TOKENS, MESSAGES

PROMPT = "Tell me about Python lists."
MAX_TOKENS = 24
# The plain request, then one per native check.
REQUESTS = 6
# Messages field -> the chat field whose verdict it follows in translate mode.
_FOLLOWS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
_TYPES: dict[str, Rule] = {
    "max_tokens": {"type": "integer", "minimum": 1, "required": True},
    "temperature": {"type": "number", "minimum": 0, "maximum": 1},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
    "top_k": {"type": "integer", "minimum": 0},
    "stream": {"type": "boolean"},
}
_HINT: Rule = {"action": "strip", "type": "object"}
_TOOLS_REFUSED = "Tool calling is not probed: refused until verified."


class MessagesProbe(NativeProbe):
    """What the probe found on /v1/messages."""


def _is_message(answer: Answer) -> bool:
    return answer.ok and isinstance(answer.body, dict) and answer.body.get("type") == "message"


def _blocks(answer: Answer, kind: str) -> list[dict[str, Any]]:
    body = answer.body if isinstance(answer.body, dict) else {}
    content = body.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _text(answer: Answer) -> str:
    return "".join(str(b.get("text", "")) for b in _blocks(answer, "text"))


def _judged(name: str, answer: Answer, honoured: bool, what: str) -> Verdict:
    return judged(name, answer, honoured, what, leave_out=("messages", "model"))


def _stop_verdict(client: EngineClient, base: dict[str, Any], text: str) -> Verdict:
    # A word of letters past the text's first third, as the chat probe picks its stop
    # (a small model's Markdown holds few words that are letters alone: "**Python**").
    found = stop_word(text)
    if found is None:
        return Verdict("stop_sequences", INCONCLUSIVE, f"no word to stop at in {quote(text)}")
    stop, said = found
    answer = client.post(MESSAGES, base | {"stop_sequences": [stop], "temperature": 0})
    body = answer.body if isinstance(answer.body, dict) else {}
    cut = _text(answer) == text[:said]
    told = body.get("stop_sequence") == stop
    reason = body.get("stop_reason")
    if cut and told and reason == "end_turn":
        # llama.cpp's server: matched and named beside the wrong reason; mended exactly.
        return Verdict(
            "stop_sequences",
            HONOURED,
            f"the text ends before {stop!r}, stop_sequence names it beside stop_reason "
            "end_turn, which the gateway mends to stop_sequence",
            _judged("stop_sequences", answer, True, "").trials,
        )
    return _judged(
        "stop_sequences",
        answer,
        cut and told and reason == "stop_sequence",
        f"the text ends before {stop!r} and the answer says stop_sequence {stop!r}",
    )


def probe_messages(client: EngineClient, *, model: str, extra: dict[str, Any]) -> MessagesProbe:
    """Ask the engine's /v1/messages a plain request, then check fields if it answers."""
    messages = [{"role": "user", "content": PROMPT}]
    base = {"model": model, "max_tokens": MAX_TOKENS, "messages": messages, **extra}
    plain = client.post(MESSAGES, base | {"temperature": 0})
    if not _is_message(plain):
        detail = describe(plain) + ("" if not plain.ok else ", not a message object")
        return MessagesProbe(False, detail)
    found = MessagesProbe(True, "HTTP 200, a message object")
    cut = client.post(MESSAGES, base | {"max_tokens": 1})
    usage = cut.body.get("usage") if isinstance(cut.body, dict) else None
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    found.verdicts.append(
        _judged(
            "max_tokens", cut, isinstance(tokens, int) and tokens <= 1, "at most 1 output token"
        )
    )
    streamed = client.stream(MESSAGES, base | {"stream": True})
    types = [e.get("type") for e in streamed.events or () if isinstance(e, dict)]
    in_order = bool(types) and types[0] == "message_start" and types[-1] == "message_stop"
    found.verdicts.append(
        _judged("stream", streamed, in_order, "an event stream from message_start to message_stop")
    )
    found.verdicts.append(_stop_verdict(client, base, _text(plain)))
    # Adaptive: a thinking block if the engine thinks at all, within a short answer
    # (enabled needs a budget of 1,024 below max_tokens: minutes on a small CPU engine).
    thought = client.post(MESSAGES, base | {"max_tokens": 64, "thinking": {"type": "adaptive"}})
    found.verdicts.append(
        _judged("thinking", thought, bool(_blocks(thought, "thinking")), "a thinking block")
    )
    counted = client.post(COUNT_TOKENS, {"model": model, "messages": messages})
    count = counted.body.get("input_tokens") if isinstance(counted.body, dict) else None
    # The whole prompt: Anthropic's input_tokens leave the cached tokens out.
    plain_usage = anthropic_usage(plain.body.get("usage") if isinstance(plain.body, dict) else None)
    asked = plain_usage.prompt if plain_usage is not None else None
    found.verdicts.append(
        _judged(
            "count_tokens",
            counted,
            isinstance(count, int) and count == asked,
            f"/v1/messages/count_tokens counts the prompt as the answer's usage does ({asked})",
        )
    )
    return found


def _text_block() -> Rule:
    return {
        "fields": {
            "text": {"action": "pass", "type": "string", "required": True},
            "cache_control": _HINT,
            "citations": {"action": "reject", "type": "array", "neutral": [[]]},
        }
    }


def _content(rules: dict[str, Rule], why: str = "") -> Rule:
    unknown: Rule = {"action": "reject"}
    if why:
        unknown["reason"] = why
    return {
        "action": "pass",
        "type": ["string", "array"],
        "required": True,
        "select": {"key": "type", "rules": rules, "unknown": unknown},
    }


def _messages_rule(*, system: bool, tools: tuple[Rule, Rule] | None = None) -> Rule:
    """Text turns; a thought sent back passes (a native engine reads it as it will; the
    translation leaves it out); a system message inside messages where the chat route's
    system role is honoured."""
    thinking: Rule = {
        "fields": {
            "thinking": {"action": "pass", "type": "string", "required": True},
            "signature": {"action": "pass", "type": "string"},
            "cache_control": _HINT,
        }
    }
    roles: dict[str, Rule] = {
        "user": {
            "fields": {"content": _content({"text": _text_block()}, "Not probed: text only.")}
        },
        "assistant": {
            "fields": {
                "content": _content(
                    {"text": _text_block(), "thinking": thinking}, "Not probed: text only."
                )
            }
        },
    }
    if tools is not None:  # (tool_use, tool_result): messages_rules.tool_blocks
        roles["assistant"]["fields"]["content"]["select"]["rules"]["tool_use"] = tools[0]
        roles["user"]["fields"]["content"]["select"]["rules"]["tool_result"] = tools[1]
    if system:
        roles["system"] = {"fields": {"content": _content({"text": _text_block()})}}
    return {
        "action": "pass",
        "type": "array",
        "required": True,
        "min_items": 1,
        "items": {"type": "object", "nullable": False},
        "select": {"key": "role", "rules": roles, "unknown": {"action": "reject"}},
    }


def _rule(name: str, verdict: Verdict | None) -> Rule:
    spec = dict(_TYPES[name])
    if verdict is not None and verdict.outcome == HONOURED:
        return {"action": "pass", **spec}
    spec.pop("required", None)
    return {
        "action": "reject",
        **spec,
        "reason": REFUSED_BECAUSE.get(
            verdict.outcome if verdict is not None else INCONCLUSIVE, REFUSED_BECAUSE[INCONCLUSIVE]
        ),
    }


def _sampling(found: MessagesProbe, chat: Any, indent: str) -> list[str]:
    lines: list[str] = []
    for name in ("max_tokens", "stream"):
        verdict = found.verdict(name) if found.native else None
        if verdict is None and chat is not None:
            verdict = chat.verdict(name)
        how = "native" if found.native else "follows the chat route's"
        lines += comment(
            f"{name} ({how}): {verdict_line(verdict) if verdict else 'not probed'}", indent
        )
        lines += entry_lines(name, _rule(name, verdict), indent)
    for name, chat_name in _FOLLOWS.items():
        verdict = chat.verdict(chat_name) if chat is not None else None
        if chat_name not in PROBED[CHAT]:
            verdict = None
        lines += comment(
            f"{name}: follows the chat route's {chat_name}: "
            + (verdict_line(verdict) if verdict else "not probed"),
            indent,
        )
        lines += entry_lines(name, _rule(name, verdict), indent)
    return lines


def _thinking_rule(found: MessagesProbe) -> Rule:
    verdict = found.verdict("thinking")
    display: Rule = {"action": "pass", "type": "string", "enum": ["summarized", "omitted"]}
    if found.native and verdict is not None and verdict.outcome == HONOURED:
        budget: Rule = {"action": "pass", "type": "integer", "minimum": 1024}
        enabled: Rule = {"fields": {"budget_tokens": budget, "display": display}}
        adaptive: Rule = {"fields": {"display": display}}
    else:
        outcome = verdict.outcome if verdict is not None else INCONCLUSIVE
        enabled = adaptive = {
            "action": "reject",
            "reason": REFUSED_BECAUSE.get(outcome, REFUSED_BECAUSE[INCONCLUSIVE]),
        }
    return {
        "action": "pass",
        "type": "object",
        "select": {
            "key": "type",
            "rules": {"enabled": enabled, "adaptive": adaptive, "disabled": {"fields": {}}},
            "unknown": {"action": "reject"},
        },
    }


def _refused_tools(indent: str) -> list[str]:
    lines = comment(_TOOLS_REFUSED, indent)
    lines += entry_lines("tools", {"action": "reject", "type": "array", "neutral": [[]]}, indent)
    lines += entry_lines(
        "tool_choice",
        {
            "action": "pass",
            "type": "object",
            "select": {
                "key": "type",
                "rules": {"auto": {"fields": {}}, "none": {"fields": {}}},
                "unknown": {"action": "reject", "reason": _TOOLS_REFUSED},
            },
        },
        indent,
    )
    return lines


def _common(found: MessagesProbe, chat: Any, indent: str, below: _Below) -> list[str]:
    """The rules both Messages routes hold: the conversation, tools, thinking, hints."""
    system = (
        chat is not None and (v := chat.verdict(SYSTEM_ROLE)) is not None and v.outcome == HONOURED
    )
    lines = entry_lines("model", {"action": "pass", "type": "string", "required": True}, indent)
    lines += entry_lines(
        "system",
        {
            "action": "pass",
            "type": ["string", "array"],
            "select": {
                "key": "type",
                "rules": {"text": _text_block()},
                "unknown": {"action": "reject"},
            },
        },
        indent,
    )
    if below.calling:
        held = chat.verdict(TOOL_MESSAGE) if chat is not None else None
        blocks = tool_blocks(tool_messages=held is not None and held.outcome == HONOURED)
        lines += comment("Text turns and tool blocks; images and documents are not probed.", indent)
        lines += entry_lines("messages", _messages_rule(system=system, tools=blocks), indent)
        lines += comment(
            "Tools follow the chat route's tool calling (translated onto chat).", indent
        )
        lines += entry_lines("tools", tools_rule(below.anchor), indent)
        lines += entry_lines("tool_choice", tool_choice_rule(below.found, below.day), indent)
    else:
        lines += comment("Text turns; images, documents and tool blocks are not probed.", indent)
        lines += entry_lines("messages", _messages_rule(system=system), indent)
        lines += _refused_tools(indent)
    if below.formats:
        lines += comment(
            "output_config.format follows the chat route's response_format (json_schema).", indent
        )
        lines += entry_lines("output_config", output_config_rule(below.anchor), indent)
    verdict = found.verdict("thinking")
    lines += comment(
        f"thinking: {verdict_line(verdict) if verdict else 'not probed natively'}", indent
    )
    lines += entry_lines("thinking", _thinking_rule(found), indent)
    lines += entry_lines("cache_control", _HINT, indent)
    return lines


@dataclass(frozen=True)
class _Below:
    """What the chat route's verdicts below the field give translate mode's rules."""

    found: StructuredProbe
    anchor: SchemaAnchor | None
    day: str
    calling: bool  # chat's tool calling honoured: tools pass
    formats: bool  # chat's json_schema keywords measured and held: output_config.format

    @classmethod
    def of(
        cls,
        found: MessagesProbe,
        chat: Any,
        structured: StructuredProbe | None,
        anchor: SchemaAnchor | None,
        day: str,
    ) -> _Below:
        if found.native or structured is None:  # a native engine's own: not probed
            return cls(structured or StructuredProbe(), None, day, False, False)
        # json_schema by its keywords' own verdicts, as chat's response_format (writer.py).
        formats = structured.schema_honoured() and anchor is not None
        return cls(structured, anchor, day, tools_honoured(structured), formats)


def route_lines(
    found: MessagesProbe,
    chat: Any,
    day: str,
    *,
    structured: StructuredProbe | None = None,
    anchor: SchemaAnchor | None = None,
) -> list[str]:
    """The /v1/messages and /v1/messages/count_tokens rules of the written policy
    (``chat``: the chat route's result; ``structured``: what the probe found below the
    field on chat, ``anchor`` its keyword table: messages_rules.py)."""
    indent = "      "
    below = _Below.of(found, chat, structured, anchor, day)
    lines = route_head(MESSAGES, found, day, "messages")
    checks = answers_rule(schema=below.formats, tool_calls=below.calling)
    if checks:
        lines[-1:-1] = [
            *comment("Answers checked against what the request asked: docs/messages.md.", "    "),
            f"    answers: {flow(checks)}",
        ]
    lines += _common(found, chat, indent, below)
    lines += _sampling(found, chat, indent)
    stop = found.verdict("stop_sequences")
    if not found.native or (stop is not None and stop.outcome == HONOURED):
        note = verdict_line(stop) if stop is not None else "matched by the gateway (translate mode)"
        lines += comment(f"stop_sequences: {note}", indent)
        lines += entry_lines(
            "stop_sequences",
            {"action": "pass", "type": "array", "items": {"type": "string", "nullable": False}},
            indent,
        )
    else:
        lines += comment(f"stop_sequences: {verdict_line(stop) if stop else 'not probed'}", indent)
        lines += entry_lines(
            "stop_sequences",
            {
                "action": "reject",
                "type": "array",
                "neutral": [[]],
                "reason": REFUSED_BECAUSE.get(
                    stop.outcome if stop else INCONCLUSIVE, REFUSED_BECAUSE[INCONCLUSIVE]
                ),
            },
            indent,
        )
    lines += comment("Bookkeeping: user_id keys affinity, never sent in translate mode.", indent)
    lines += entry_lines(
        "metadata",
        {
            "action": "pass",
            "type": "object",
            "fields": {"user_id": {"action": "pass", "type": "string", "max_length": 256}},
        },
        indent,
    )
    lines.append("")
    count = found.verdict("count_tokens")
    if found.native and (count is None or count.outcome != HONOURED):
        lines += comment(
            f"{COUNT_TOKENS} is not in this policy: the engine's own "
            f"({verdict_line(count) if count else 'not probed'}) does not count the prompt "
            "(translate mode counts it through the chat route).",
            "  ",
        )
        lines.append("")
        return lines
    lines += [f"  {COUNT_TOKENS}:", "    fields:"]
    lines += _common(found, chat, indent, below)
    lines.append("")
    return lines


def table_line(found: MessagesProbe) -> str:
    """One line for the probe's printed table."""
    if not found.native:
        return f"{MESSAGES}: not served natively ({found.detail}): use upstream.messages: translate"
    judged = ", ".join(f"{v.field} {v.outcome}" for v in found.verdicts)
    return f"{MESSAGES}: served natively ({judged}): upstream.messages: native is possible"
