"""The probe of /v1/responses: does the engine serve it natively, and which Responses
fields does it honour there; and the route's rules the written policy holds.

Native (the plain request answers a ``response`` object): max_output_tokens, a
streamed answer ending in ``response.completed``, text.format json_object and
previous_response_id are measured on the engine's own route, and the policy
says ``upstream.responses: native``. Not native (404, or not a response
object): the gateway translates onto chat completions, so each field follows
the chat route's verdict on the field it becomes (max_output_tokens ->
max_tokens, text.format -> response_format, the sampling fields and engine
extensions as they are). The fields no engine can honour behind the gateway
(built-in tools, background, conversation, prompt templates, include) are
rejected either way, as in policies/ft-serve.yaml.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.probe.client import Answer, EngineClient
from gateway.probe.fields import PROBED, Rule
from gateway.probe.native import NativeProbe, describe, judged, route_head
from gateway.probe.route import CHAT
from gateway.probe.structured import StructuredProbe
from gateway.probe.structured_rules import (
    NATIVE_ANCHOR,
    SchemaAnchor,
    format_rules,
    keyword_table,
    text_format_rule,
    tool_rules,
    tools_honoured,
)
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    REFUSED_BECAUSE,
    REJECTED,
    Verdict,
    verdict_line,
)
from gateway.probe.yamltext import comment, entry_lines
from gateway.responses.translate import GATEWAY_ONLY

RESPONSES = "/v1/responses"
PROMPT = "Tell me about Python lists."
MAX_OUTPUT = 16
# The plain request, then one per native check.
REQUESTS = 5
# Responses field -> the chat field whose verdict it follows in translate mode.
_FOLLOWS = {
    "max_output_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "seed": "seed",
    "stream": "stream",
}
_REFUSED: dict[str, Rule] = {
    "tool_choice": {"action": "reject", "type": ["string", "object"], "neutral": ["none", "auto"]},
    # false: the gateway keeps the first tool call (docs/responses.md).
    "parallel_tool_calls": {"action": "pass", "type": "boolean"},
    "reasoning": {
        "action": "pass",
        "type": "object",
        "fields": {
            "effort": {"action": "reject", "type": "string"},
            "summary": {
                "action": "pass",
                "type": "string",
                "enum": ["auto", "concise", "detailed"],
            },
        },
    },
    "top_logprobs": {
        "action": "reject",
        "type": "integer",
        "minimum": 0,
        "maximum": 20,
        "neutral": [0],
    },
    "include": {
        "action": "pass",
        "type": "array",
        "items": {"type": "string", "enum": ["reasoning.encrypted_content"]},
    },
    "truncation": {"action": "reject", "type": "string", "neutral": ["disabled"]},
    "max_tool_calls": {"action": "reject", "type": "integer"},
    "background": {"action": "reject", "type": "boolean", "neutral": [False]},
    "conversation": {"action": "reject", "type": ["string", "object"]},
    "prompt": {"action": "reject", "type": "object"},
}
# In native mode the engine's own route reads these: refused unless neutral, as before
# the gateway learnt to translate them (a native engine's handling is not probed).
_NATIVE: dict[str, Rule] = {
    "parallel_tool_calls": {"action": "reject", "type": "boolean", "neutral": [True]},
    "reasoning": {"action": "reject", "type": "object", "neutral": [{}]},
    "include": {"action": "reject", "type": "array", "neutral": [[]]},
}
# Hints clients send by default: accepted, not sent to the engine, counted.
_HINTS = ("prompt_cache_options", "access_programs")
# The rest of what the translation keeps and echoes, never sending it to the engine
# (bookkeeping), read from the translator so that the two cannot drift apart.
_BOOKKEEPING = sorted(GATEWAY_ONLY - _REFUSED.keys() - {"store", "previous_response_id", *_HINTS})


class ResponsesProbe(NativeProbe):
    """What the probe found on /v1/responses."""


def _is_response(answer: Answer) -> bool:
    return answer.ok and isinstance(answer.body, dict) and answer.body.get("object") == "response"


def _text(body: Any) -> str:
    parts = []
    for item in body.get("output") or () if isinstance(body, dict) else ():
        for part in item.get("content") or () if isinstance(item, dict) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "".join(parts)


def _judged(name: str, answer: Answer, honoured: bool, what: str) -> Verdict:
    return judged(name, answer, honoured, what, leave_out=("input",))


def probe_responses(client: EngineClient, *, model: str, extra: dict[str, Any]) -> ResponsesProbe:
    """Ask the engine's /v1/responses a plain request, then check fields if it answers."""
    base = {"model": model, "input": PROMPT, "max_output_tokens": MAX_OUTPUT, **extra}
    plain = client.post(RESPONSES, base)
    if not _is_response(plain):
        return ResponsesProbe(
            False, describe(plain) + ("" if not plain.ok else ", not a response object")
        )
    found = ResponsesProbe(True, "HTTP 200, a response object")
    cut = client.post(RESPONSES, base | {"max_output_tokens": 1})
    usage = cut.body.get("usage") if isinstance(cut.body, dict) else None
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    found.verdicts.append(
        _judged(
            "max_output_tokens",
            cut,
            isinstance(tokens, int) and tokens <= 1,
            "at most 1 output token",
        )
    )
    streamed = client.stream(RESPONSES, base | {"stream": True})
    types = [e.get("type") for e in streamed.events or () if isinstance(e, dict)]
    found.verdicts.append(
        _judged(
            "stream",
            streamed,
            "response.completed" in types,
            "an event stream ending in response.completed",
        )
    )
    json_mode = client.post(
        RESPONSES,
        base
        | {
            "input": "Answer in JSON: a list of two numbers.",
            "text": {"format": {"type": "json_object"}},
            "max_output_tokens": 64,
        },
    )
    try:
        parsed = json.loads(_text(json_mode.body))
    except ValueError:
        parsed = None
    found.verdicts.append(_judged("text", json_mode, parsed is not None, "the text parses as JSON"))
    previous = plain.body.get("id")
    chained = client.post(
        RESPONSES, base | {"previous_response_id": previous, "input": "And tuples?"}
    )
    found.verdicts.append(
        _judged(
            "previous_response_id",
            chained,
            _is_response(chained),
            "the engine continued a stored response",
        )
    )
    return found


def _follow(name: str, verdict: Verdict | None, spec: Rule) -> tuple[str, Rule]:
    neutral = spec.pop("neutral", [])
    if verdict is not None and verdict.outcome == HONOURED:
        return f"{name}: follows the chat route's {verdict.field}: {verdict_line(verdict)}", {
            "action": "pass",
            **spec,
        }
    rule: Rule = {"action": "reject", **spec, "reason": "This engine does not honour it."}
    if neutral:
        rule["neutral"] = neutral
    shown = verdict_line(verdict) if verdict is not None else "not probed"
    return f"{name}: {shown}", rule


def _text_rule(honoured: bool, table: SchemaAnchor | None = None) -> Rule:
    """``text``: json_object passed where ``honoured``; json_schema keyword by keyword
    where ``table`` is given (its own verdicts), else as json_object."""
    json_rule: Rule = (
        {"action": "pass"}
        if honoured
        else {
            "action": "reject",
            "reason": "JSON mode and structured outputs are not supported by this engine.",
        }
    )
    format_rule = format_rules(json_rule, json_rule)
    del format_rule["select"]["unknown"]  # an unknown type: refused as before (no rule)
    if table is not None:
        format_rule = text_format_rule(table)
        rules = format_rule["select"]["rules"]
        rules["json_object"] = {"fields": {"type": {"action": "pass"}}} if honoured else json_rule
        rules["text"] = {"fields": {"type": {"action": "pass"}}}
    return {
        "action": "pass",
        "type": "object",
        "fields": {
            "format": format_rule,
            "verbosity": {"action": "reject", "type": "string", "neutral": ["medium"]},
        },
    }


def _responses_tools(chat_rules: dict[str, Any]) -> Rule:
    """The chat route's tools rule in the Responses API's flat shape."""
    chat_tools = chat_rules["tools"].value
    function = chat_tools["select"]["rules"]["function"]["fields"]["function"]["fields"]
    return {
        "action": "pass",
        "type": "array",
        "select": {
            "key": "type",
            "rules": {"function": {"fields": {"type": {"action": "pass"}, **function}}},
            "unknown": {"action": "reject"},
        },
    }


def _input_rule(*, native: bool = False) -> Rule:
    text_part = {
        "fields": {
            "text": {"action": "pass", "type": "string", "required": True},
            "prompt_cache_breakpoint": {"action": "strip", "type": "object"},
        }
    }
    item = {
        "type": {"action": "pass", "type": "string"},
        "id": {"action": "pass", "type": "string"},
    }

    # An earlier answer sent back (the Agents SDK's to_input_list(), Copilot Chat):
    # its status, and its parts' annotations (empty here) and logprobs.
    answer_part = {
        "fields": {
            **text_part["fields"],
            "annotations": {"action": "reject", "type": "array", "neutral": [[]]},
            "logprobs": {"action": "strip"},
        }
    }

    def role(part: str) -> Rule:
        content = {
            "action": "pass",
            "type": ["string", "array"],
            "required": True,
            "select": {
                "key": "type",
                "rules": {part: answer_part if part == "output_text" else text_part},
            },
        }
        status = {"action": "pass", "type": "string"}
        return {"fields": {**item, "status": status, "content": content}}

    return {
        "action": "pass",
        "type": ["string", "array"],
        "select": {
            "key": "type",
            "absent": "message",
            "rules": {
                "message": {
                    "select": {
                        "key": "role",
                        "rules": {
                            "user": role("input_text"),
                            "system": role("input_text"),
                            "developer": role("input_text"),
                            "assistant": role("output_text"),
                        },
                    }
                },
                # Replayed reasoning: left out of the chat request (chat engines take none
                # back); an item_reference: resolved from the gateway's store.
                **({} if native else _TRANSLATED_ITEMS),
            },
        },
    }


_TRANSLATED_ITEMS: dict[str, Rule] = {
    "reasoning": {
        "fields": {
            "type": {"action": "pass", "type": "string"},
            "id": {"action": "pass", "type": "string"},
            "status": {"action": "pass", "type": "string"},
            "summary": {"action": "pass", "type": "array"},
            "content": {"action": "pass", "type": "array"},
            "encrypted_content": {"action": "pass", "type": "string"},
        }
    },
    "item_reference": {
        "fields": {
            "type": {"action": "pass", "type": "string"},
            "id": {"action": "pass", "type": "string", "required": True},
        }
    },
}


def route_lines(
    found: ResponsesProbe,
    chat: Any,
    day: str,
    *,
    structured: StructuredProbe | None = None,
    anchor: SchemaAnchor | None = None,
) -> list[str]:
    """The /v1/responses rules of the written policy (``chat``: the chat route's result;
    ``structured``: what the probe found below the field, ``anchor`` the chat route's
    keyword table)."""
    indent = "      "
    lines = route_head(RESPONSES, found, day, "responses")
    lines += entry_lines("model", {"action": "pass", "type": "string", "required": True}, indent)
    lines += entry_lines("instructions", {"action": "pass", "type": "string"}, indent)
    lines += comment("Messages with text parts; other items and parts are refused.", indent)
    lines += entry_lines("input", _input_rule(native=found.native), indent)
    for name, chat_name in _FOLLOWS.items():
        spec = dict(PROBED[CHAT].get(chat_name, {"type": "integer", "minimum": 1}))
        native = found.verdict(name)
        if native is not None:
            note, rule = _follow(name, native, spec)
            note = f"{name}: {verdict_line(native)} (native)"
        else:
            note, rule = _follow(name, chat.verdict(chat_name) if chat is not None else None, spec)
        lines += comment(note, indent)
        lines += entry_lines(name, rule, indent)
    json_verdict = found.verdict("text")
    if json_verdict is None and chat is not None:
        json_verdict = chat.verdict("response_format")
    honoured = json_verdict is not None and json_verdict.outcome == HONOURED
    # json_schema by its keywords' verdicts: the engine's own (measured where its text
    # held), or, translated, chat's (measured whatever chat's json_object found).
    table = anchor if structured is not None and structured.schema_honoured() else None
    if found.native and structured is not None:
        measured = structured.native_keywords
        table = SchemaAnchor(keyword_table(measured, day), name=NATIVE_ANCHOR) if measured else None
    lines += comment(
        f"text.format: {verdict_line(json_verdict) if json_verdict else 'not probed'}"
        + ("; json_schema: each keyword as probed" if table else ""),
        indent,
    )
    if json_verdict is not None and json_verdict.outcome in (BROKEN, REJECTED) and found.native:
        # The engine cannot take text at all (it failed on it): not even a neutral one.
        text_rule: Rule = {
            "action": "reject",
            "type": "object",
            "neutral": [{"format": {"type": "text"}}],
            "drop_neutral": True,
            "reason": REFUSED_BECAUSE[json_verdict.outcome],
        }
    else:
        text_rule = _text_rule(honoured, table if structured is not None else None)
    lines += entry_lines("text", text_rule, indent)
    calling = tools_honoured(structured) and not found.native
    if calling and structured is not None:
        lines += comment(
            "Tools follow the chat route's tool calling (translated onto chat).", indent
        )
        chat_rules = tool_rules(structured, anchor if table is not None else None, day)
        lines += entry_lines("tools", _responses_tools(chat_rules), indent)
        lines += entry_lines("tool_choice", chat_rules["tool_choice"], indent)
    else:
        lines += comment("Tool calling is not probed: refused until verified.", indent)
        lines += entry_lines(
            "tools", {"action": "reject", "type": "array", "neutral": [[]]}, indent
        )
    for name, rule in _REFUSED.items():
        if calling and name == "tool_choice":
            continue
        lines += entry_lines(name, _NATIVE.get(name, rule) if found.native else rule, indent)
    chained = found.verdict("previous_response_id")
    if found.native and chained is not None and chained.outcome != HONOURED:
        lines += comment(f"previous_response_id: {verdict_line(chained)}", indent)
        lines += entry_lines("previous_response_id", {"action": "reject", "type": "string"}, indent)
    else:
        lines += comment(
            "Kept by the gateway's response store (store.backend) in translate mode.", indent
        )
        lines += entry_lines("previous_response_id", {"action": "pass", "type": "string"}, indent)
    lines += entry_lines("store", {"action": "pass", "type": "boolean"}, indent)
    for name in _BOOKKEEPING:
        lines += entry_lines(name, {"action": "pass" if not found.native else "strip"}, indent)
    for name in _HINTS:
        lines += entry_lines(name, {"action": "strip", "type": "object"}, indent)
    lines.append("")
    return lines


def table_line(found: ResponsesProbe) -> str:
    """One line for the probe's printed table."""
    if not found.native:
        return (
            f"{RESPONSES}: not served natively ({found.detail}): use upstream.responses: translate"
        )
    judged = ", ".join(f"{v.field} {v.outcome}" for v in found.verdicts)
    return f"{RESPONSES}: served natively ({judged}): upstream.responses: native is possible"
