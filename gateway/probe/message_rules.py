"""The ``messages`` rule a probe writes for chat: a rule per role (``select`` by
``role``) and per content part (``select`` by ``type``), each from its verdict and
with its evidence above it; what the probe does not measure (``name``,
``refusal``, assistant ``audio``, the deprecated function role) gets the rules of
the hand-written policy, policies/ft-serve.yaml.

How verdicts become rules:

- system: honoured passes; otherwise rejected with the reason.
- developer: renamed to system wherever system passes. The prompt tokens show that
  a developer message is rendered, not whether the template maps it onto system or
  writes the word "developer", which the model was not trained on; system means the
  same, so the rename is right either way. Where system does not pass, an honoured
  developer passes and any other verdict rejects.
- an unknown role: rejected whatever the engine does. OpenAI answers 400
  invalid_value; an engine that renders it, drops it or fails on it serves the
  client's mistake worse than that.
- text parts, image_url, input_audio and file parts: honoured passes, otherwise
  rejected with the reason (a text part rule is the same in every role).
- the tool message: honoured (the call and the result both rendered) passes the
  assistant's tool_calls and the tool role; otherwise both are rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.probe.messages import (
    AUDIO_PART,
    DEVELOPER_ROLE,
    FILE_PART,
    IMAGE_PART,
    PART_TYPES,
    SYSTEM_ROLE,
    TEXT_PART,
    TOOL_MESSAGE,
    UNKNOWN_ROLE,
)
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    REJECTED,
    Verdict,
    probed_note,
)
from gateway.probe.yamltext import Alias, Anchor, Noted

Rule = dict[str, Any]
Find = Callable[[str], Verdict | None]  # a route's verdict by name

_NAME: Rule = {"action": "pass", "type": "string"}
_TEXT_FIELDS: Rule = {"fields": {"text": {"action": "pass", "type": "string", "required": True}}}
_TOOL_CALL: Rule = {
    "fields": {
        "id": {"action": "pass", "type": "string", "required": True},
        "function": {
            "action": "pass",
            "type": "object",
            "required": True,
            "fields": {
                "name": {"action": "pass", "type": "string", "required": True},
                # OpenAI: a JSON string, not an object.
                "arguments": {"action": "pass", "type": "string", "required": True},
            },
        },
    }
}
# What each verdict's subject is called in a reason.
_WHAT = {
    SYSTEM_ROLE: "system messages",
    DEVELOPER_ROLE: "developer messages",
    TEXT_PART: "text parts",
    IMAGE_PART: "image parts",
    AUDIO_PART: "audio parts",
    FILE_PART: "file parts",
    TOOL_MESSAGE: "tool calls and tool results",
}


def reason(name: str, outcome: str) -> str:
    """The text a client's 400 carries for a rejected role or part."""
    what = _WHAT[name]
    if name == TOOL_MESSAGE and outcome == IGNORED:
        return (
            "This engine does not render both a tool call and its result: the model "
            "would not see the whole exchange."
        )
    return {
        IGNORED: f"This engine drops {what} without a word: the model would never see them.",
        REJECTED: f"This engine does not support {what}.",
        BROKEN: f"This engine fails on {what}.",
        INCONCLUSIVE: f"{what[0].upper()}{what[1:]} have not been verified on this engine.",
    }.get(outcome, f"This engine does not honour {what}.")


def _verdict(find: Find, name: str) -> Verdict:
    return find(name) or Verdict(name, INCONCLUSIVE, "not probed")


def _note(verdict: Verdict, day: str, then: str = "", *, review: bool = True) -> str:
    text = probed_note(verdict.field, verdict, day, review=review)
    return f"{text}; {then}" if then else text


def _member(verdict: Verdict, rule: Rule, *, keep: bool = True) -> Rule:
    """``rule`` (a select's member rule, ``action`` pass by default) for an honoured
    verdict, else rejected with the verdict's reason: with the rule's ``fields`` kept
    (``keep``: a role's, ready for the day it passes) or without (a part's)."""
    if verdict.outcome == HONOURED:
        return rule
    rejected = {"action": "reject", "reason": reason(verdict.field, verdict.outcome)}
    return {**rejected, **rule} if keep else rejected


def messages_rule(find: Find, day: str) -> Noted:
    """The ``messages`` rule for a chat route whose verdicts ``find`` returns by name."""
    text = _verdict(find, TEXT_PART)
    system = _verdict(find, SYSTEM_ROLE)
    developer = _verdict(find, DEVELOPER_ROLE)
    tool = _verdict(find, TOOL_MESSAGE)
    unknown = _verdict(find, UNKNOWN_ROLE)

    text_part = Noted(
        Anchor("text-part", _member(text, _TEXT_FIELDS, keep=False)),
        _note(text, day, "the same rule in every role's content"),
    )
    text_content = Anchor(
        "text-content",
        {
            "action": "pass",
            "type": ["string", "array"],
            "required": True,
            "select": {
                "key": "type",
                "rules": {"text": text_part},
                "unknown": {"action": "reject", "reason": "This message takes text parts only."},
            },
        },
    )
    role_fields = {"content": Alias("text-content"), "name": Alias("name")}
    system_rule = _member(
        system, {"fields": {"content": text_content, "name": Anchor("name", _NAME)}}
    )
    developer_rule, then = _developer(developer, system_rule, role_fields)
    user_parts: dict[str, Any] = {"text": Alias("text-part")}
    for name, kind in PART_TYPES.items():
        verdict = _verdict(find, name)
        payload = {kind: {"action": "pass", "type": "object", "required": True}}
        user_parts[kind] = Noted(
            _member(verdict, {"fields": payload}, keep=False), _note(verdict, day)
        )
    user_rule = {
        "fields": {
            "content": {
                "action": "pass",
                "type": ["string", "array"],
                "required": True,
                "select": {"key": "type", "rules": user_parts, "unknown": {"action": "reject"}},
            },
            "name": Alias("name"),
        }
    }
    tool_calls: Rule = {"action": "pass", "type": "array"}
    if tool.outcome != HONOURED:
        tool_calls = {
            "action": "reject",
            "type": "array",
            "neutral": [[]],
            "reason": reason(TOOL_MESSAGE, tool.outcome),
        }
    tool_calls["select"] = {"key": "type", "rules": {"function": _TOOL_CALL}}
    assistant_rule = {
        "fields": {
            # null only together with tool_calls.
            "content": {
                "action": "pass",
                "type": ["string", "array"],
                "select": {
                    "key": "type",
                    "rules": {
                        "text": Alias("text-part"),
                        "refusal": {
                            "fields": {
                                "refusal": {"action": "pass", "type": "string", "required": True}
                            }
                        },
                    },
                    "unknown": {"action": "reject"},
                },
            },
            "name": Alias("name"),
            "refusal": {"action": "pass", "type": "string"},
            "tool_calls": Noted(tool_calls, _note(tool, day, "the call half of the exchange")),
            "audio": {
                "action": "reject",
                "type": "object",
                "reason": "Audio output is not supported by this engine.",
            },
            "function_call": {
                "action": "reject",
                "type": "object",
                "reason": "Function calling is not supported by this engine.",
            },
        }
    }
    tool_rule = _member(
        tool,
        {
            "fields": {
                "content": Alias("text-content"),
                "tool_call_id": {"action": "pass", "type": "string", "required": True},
            }
        },
    )
    rules = {
        "system": Noted(system_rule, _note(system, day)),
        "developer": Noted(developer_rule, _note(developer, day, then)),
        "user": Noted(
            user_rule, "user: every probe request has a user message; its parts were probed:"
        ),
        "assistant": Noted(
            assistant_rule,
            "assistant: not probed as a role (the earlier turns of a conversation); its "
            "tool_calls were:",
        ),
        "tool": Noted(tool_rule, _note(tool, day, "the result half of the exchange")),
        "function": Noted(
            {
                "action": "reject",
                "reason": "The function role is deprecated, and function calling is not "
                "supported by this engine.",
            },
            "function: not probed: the deprecated role of the old function calling.",
        ),
    }
    # Rejected whatever the engine does, so nothing to review when it was not measured.
    unknown_note = _note(
        unknown,
        day,
        "rejected whatever the engine does: OpenAI answers 400 invalid_value",
        review=False,
    )
    rule = {
        "action": "pass",
        "type": "array",
        "required": True,
        "min_items": 1,
        "items": {"type": "object", "nullable": False},
        "select": {
            "key": "role",
            "rules": rules,
            "unknown": Noted({"action": "reject"}, unknown_note),
        },
    }
    return Noted(
        rule,
        "Inside messages: a rule per role, and per content part of a role, from what the "
        "probe measured (each says what and how); name, refusal and the rest as in the "
        "hand-written policy.",
    )


def _developer(verdict: Verdict, system: Rule, fields: Rule) -> tuple[Rule, str]:
    """The developer role's rule, and what the comment adds about it."""
    if system.get("action", "pass") == "pass":
        rule = {"action": "rename", "to": "system", "fields": fields}
        if verdict.outcome == HONOURED:
            return rule, (
                "renamed to system, which means the same: the prompt tokens cannot show "
                "whether the template maps developer onto system or writes the word as it "
                "is, which the model was not trained on"
            )
        return rule, "renamed to system, which the engine renders"
    if verdict.outcome == HONOURED:
        return {"fields": fields}, "passed: the engine renders it, and system does not pass"
    rejected = {"action": "reject", "reason": reason(DEVELOPER_ROLE, verdict.outcome)}
    return {**rejected, "fields": fields}, ""
