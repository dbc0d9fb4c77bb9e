"""The Messages routes' rules for what translate mode sends onto chat's tools and response
format, written from the chat route's verdicts below the field (structured.py), as the
Responses route's are (responses.py): a custom tool's ``input_schema`` and
``output_config.format.schema`` checked by the chat route's keyword table (the one
``&engine-schema``), each ``tool_choice`` type as chat honours its translation (any:
required, tool: a named function), the tool blocks of a conversation as chat honours
tool messages, and the answer checks for what passes. A native engine's own tool
calling and JSON mode are not probed: refused, as before.
"""

from __future__ import annotations

from typing import Any

from gateway.probe import tools
from gateway.probe.fields import Rule
from gateway.probe.structured import StructuredProbe
from gateway.probe.structured_rules import NO_GRAMMAR, SchemaAnchor
from gateway.probe.verdict import HONOURED

_HINT: Rule = {"action": "strip", "type": "object"}
# tool_choice's type -> the chat check of what translate mode sends for it.
_CHOICES = {"auto": tools.AUTO, "none": tools.NONE, "any": tools.REQUIRED, "tool": tools.NAMED}
_ONE_CALL: Rule = {"action": "pass", "type": "boolean"}  # the gateway keeps one call itself


def _schema(anchor: SchemaAnchor | None) -> Any:
    return anchor.use() if anchor is not None else dict(NO_GRAMMAR)


def tools_rule(anchor: SchemaAnchor | None) -> Rule:
    """``tools``: custom tools, each ``input_schema`` checked by the keyword table; server
    tools refused (they run inside Anthropic's service)."""
    fields: Rule = {
        # Chat's function names allow 64 characters (Anthropic's 128).
        "name": {
            "action": "pass",
            "type": "string",
            "required": True,
            "pattern": "[a-zA-Z0-9_-]{1,64}",
        },
        "description": {"action": "pass", "type": "string"},
        "input_schema": {
            "action": "pass",
            "type": "object",
            "required": True,
            "json_schema": _schema(anchor),
        },
        "strict": {"action": "pass", "type": "boolean"},
        "cache_control": _HINT,
        "eager_input_streaming": {"action": "pass", "type": "boolean"},
    }
    return {
        "action": "pass",
        "type": "array",
        "select": {
            "key": "type",
            "absent": "custom",
            "rules": {"custom": {"fields": fields}},
            "unknown": {
                "action": "reject",
                "reason": "Server tools run inside Anthropic's service.",
            },
        },
    }


def tool_choice_rule(found: StructuredProbe, day: str) -> Rule:
    """``tool_choice``: each type passed where chat honours what it becomes."""
    rules: dict[str, Rule] = {}
    for kind, check in _CHOICES.items():
        fields: Rule = {"disable_parallel_tool_use": _ONE_CALL}
        if kind == "tool":
            fields["name"] = {"action": "pass", "type": "string", "required": True}
        verdict = found.tool(check)
        if verdict is not None and verdict.outcome == HONOURED:
            rules[kind] = {"fields": fields}
        else:
            rules[kind] = {
                "action": "reject",
                "reason": f"This engine does not honour tool_choice {check} (probed {day}).",
                "fields": fields,
            }
    return {
        "action": "pass",
        "type": "object",
        "select": {"key": "type", "rules": rules, "unknown": {"action": "reject"}},
    }


def tool_blocks(*, tool_messages: bool) -> tuple[Rule, Rule]:
    """The ``tool_use`` (assistant) and ``tool_result`` (user) blocks of a conversation:
    chat tool calls and tool messages, passed where chat honours tool messages."""
    use: Rule = {
        "fields": {
            "id": {"action": "pass", "type": "string", "required": True},
            "name": {"action": "pass", "type": "string", "required": True},
            "input": {"action": "pass", "type": "object", "required": True},
            "cache_control": _HINT,
            # Who called it: the model ({type: direct}, or null as the SDKs dump a block).
            "caller": {"action": "reject", "type": "object", "neutral": [{"type": "direct"}]},
        }
    }
    result: Rule = {
        "fields": {
            "tool_use_id": {"action": "pass", "type": "string", "required": True},
            "content": {"action": "pass", "type": ["string", "array"]},
            # A chat tool message carries its content only.
            "is_error": {"action": "reject", "type": "boolean", "neutral": [False]},
            "cache_control": _HINT,
        }
    }
    if not tool_messages:
        why = "The engine does not honour chat's tool messages, which tool results become."
        use = {"action": "reject", "reason": why, **use}
        result = {"action": "reject", "reason": why, **result}
    return use, result


def output_config_rule(anchor: SchemaAnchor | None) -> Rule:
    """``output_config``: ``format`` (json_schema) checked by the keyword table, which chat
    honours as response_format; ``effort`` refused unless Anthropic's default (high)."""
    return {
        "action": "pass",
        "type": "object",
        "fields": {
            "effort": {
                "action": "reject",
                "type": "string",
                "neutral": ["high"],
                "reason": "No effort control was probed; use thinking.",
            },
            "format": {
                "action": "pass",
                "type": "object",
                "fields": {
                    "type": {
                        "action": "pass",
                        "type": "string",
                        "required": True,
                        "enum": ["json_schema"],
                    },
                    "schema": {
                        "action": "pass",
                        "type": "object",
                        "required": True,
                        "json_schema": _schema(anchor),
                    },
                },
            },
        },
    }
