"""A Messages request as a chat-completions request, translated exactly or refused.

Runs on a body the policy has let through (the ``/v1/messages`` route of
policies/ft-serve.yaml), so what reaches here is what the deployment accepts;
what chat completions has no way to say is still a 400 that names the field,
whatever the policy (an ignored field is the silent failure this gateway exists
to stop). Fields this module does not name are engine extensions the policy
passes (``seed``, ``min_p``, ...): forwarded as they are. The conversation is
blocks.py's; docs/messages.md has every field's translation. Three worth a
word here:

- ``stop_sequences`` are matched by the gateway, not sent: a chat answer says
  neither which stop string ended it nor whether one did (finish_reason
  ``stop`` is also the end of the text), and Anthropic's answer says both.
- ``thinking`` is the engine's thinking switch,
  ``chat_template_kwargs.enable_thinking`` (Qwen3-style templates, ft serve):
  absent or ``disabled`` off (Anthropic's default is no thinking), ``enabled``
  and ``adaptive`` on; ``budget_tokens`` is sent as ``thinking_budget_tokens``
  (llama.cpp's server's name) where the policy lets it through.
- ``context_management`` may only clear thinking: the translation leaves every
  thought sent back out anyway (blocks.py).
- ``disable_parallel_tool_use`` is the gateway's: the answer's first tool call
  is kept (responses/onecall.py), whatever the engine does with the flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.errors import InvalidRequest
from gateway.messages.blocks import field_of, refuse, to_messages

# Kept by the gateway, never sent to the engine: a hint for a cache the engine runs
# by itself (cache_control), bookkeeping (metadata), the one tier there is
# (service_tier), what the gateway does itself (stop_sequences).
GATEWAY_ONLY = frozenset({"metadata", "cache_control", "service_tier", "stop_sequences"})
# Anthropic features with no chat-completions equivalent: refused unless neutral.
NO_CHAT: dict[str, tuple[Any, ...]] = {
    "container": (),
    "inference_geo": (),
    "mcp_servers": ([],),
    "speed": ("standard",),
    "fallbacks": ([],),
    "diagnostics": (),
    "user_profile_id": (),
}
_THINKING_ON = frozenset({"enabled", "adaptive"})
_FORCED = frozenset({"any", "tool"})
# Anthropic's own wording (Claude Code matches it to retry without thinking).
FORCED_WITH_THINKING = "Thinking may not be enabled when tool_choice forces tool use."


@dataclass
class Wants:
    """What the answer must do that the engine is not asked for."""

    stops: list[str] = field(default_factory=list)  # stop_sequences, matched by the gateway
    thinking: bool = False  # the engine thinks: its reasoning becomes thinking blocks
    show_thinking: bool = True  # display "omitted": thinking blocks without their text
    one_call: bool = False  # disable_parallel_tool_use: the answer's first tool call only
    user: str | None = None  # metadata.user_id (an affinity key)


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequest("Invalid type for 'tools'.", param="tools", code="invalid_type")
    out = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"Invalid type for '{where}'.", param=where, code="invalid_type")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise refuse(
                f"{where}.type",
                f"is not supported: '{kind}' is a tool Anthropic's service runs, and this "
                "engine has none.",
                code="unsupported_value",
            )
        if tool.get("defer_loading"):
            raise refuse(f"{where}.defer_loading", "has no chat-completions equivalent.")
        for key in ("input_examples", "allowed_callers"):
            if tool.get(key):
                raise refuse(f"{where}.{key}", "has no chat-completions equivalent.")
        function: dict[str, Any] = {"name": field_of(tool, "name", where)}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        function["parameters"] = field_of(tool, "input_schema", where, dict)
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, wants: Wants) -> Any:
    if not isinstance(choice, dict):
        raise InvalidRequest(
            "Invalid type for 'tool_choice': expected an object.",
            param="tool_choice",
            code="invalid_type",
        )
    wants.one_call = choice.get("disable_parallel_tool_use") is True
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool":
        return {"type": "function", "function": {"name": field_of(choice, "name", "tool_choice")}}
    raise refuse("tool_choice.type", f"cannot be translated ('{kind}').", code="unsupported_value")


def _thinking(body: dict[str, Any], chat: dict[str, Any], wants: Wants) -> None:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if thinking is not None and kind not in (*_THINKING_ON, "disabled"):
        raise refuse("thinking.type", f"cannot be translated ('{kind}').", code="unsupported_value")
    on = kind in _THINKING_ON
    if on and isinstance(body.get("tool_choice"), dict):
        if body["tool_choice"].get("type") in _FORCED:
            raise InvalidRequest(FORCED_WITH_THINKING, code="invalid_value")
    if on and isinstance(thinking, dict):
        budget = thinking.get("budget_tokens")
        if budget is not None:
            chat["thinking_budget_tokens"] = budget
        wants.show_thinking = thinking.get("display") != "omitted"
    wants.thinking = on
    kwargs = body.get("chat_template_kwargs")
    kwargs = dict(kwargs) if isinstance(kwargs, dict) else {}
    asked = kwargs.get("enable_thinking")
    if asked is not None and asked != on:
        said = f"thinking: {kind}" if thinking is not None else "no thinking (its default)"
        raise InvalidRequest(
            "Invalid 'chat_template_kwargs.enable_thinking': the request asks for "
            f"{said}, and the gateway sets the engine's switch from 'thinking'.",
            param="chat_template_kwargs.enable_thinking",
            code="invalid_value",
        )
    kwargs["enable_thinking"] = on
    chat["chat_template_kwargs"] = kwargs


def _format(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("type") != "json_schema":
        kind = value.get("type") if isinstance(value, dict) else value
        raise refuse(f"{where}.type", f"cannot be translated ('{kind}').", code="unsupported_value")
    schema = field_of(value, "schema", where, dict)
    # Anthropic's structured outputs are constrained to the schema: strict.
    return {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": True},
    }


def _output_config(config: Any, chat: dict[str, Any]) -> None:
    if not isinstance(config, dict):
        raise InvalidRequest(
            "Invalid type for 'output_config'.", param="output_config", code="invalid_type"
        )
    for key, value in config.items():
        if value is None:
            continue
        if key == "effort":
            chat["reasoning_effort"] = value
        elif key == "format":
            chat["response_format"] = _format(value, "output_config.format")
        else:
            raise refuse(f"output_config.{key}", "has no chat-completions equivalent.")


def _context_management(value: Any) -> None:
    """Only thinking may be cleared (Claude Code asks it on every request): the
    translation leaves every thought sent back out, as the template would."""
    edits = value.get("edits") if isinstance(value, dict) else None
    for key in value if isinstance(value, dict) else ():
        if key != "edits":
            raise refuse(f"context_management.{key}", "has no chat-completions equivalent.")
    for index, edit in enumerate(edits or ()):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if not (isinstance(kind, str) and kind.startswith("clear_thinking_")):
            raise refuse(
                f"context_management.edits[{index}].type",
                f"cannot be done by this gateway ('{kind}'): it never edits the conversation.",
                code="unsupported_value",
            )


def _stops(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise InvalidRequest(
            "Invalid type for 'stop_sequences': expected an array of strings.",
            param="stop_sequences",
            code="invalid_type",
        )
    return [s for s in value if s]


def to_chat(body: dict[str, Any], *, count: bool = False) -> tuple[dict[str, Any], Wants]:
    """The chat-completions body for a policy-approved Messages ``body``, and what its
    answer must do that the engine is not asked for. ``count``: a count_tokens body
    (one output token asked: the answer's usage counts the prompt)."""
    chat: dict[str, Any] = {}
    wants = Wants(stops=_stops(body.get("stop_sequences")))
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        wants.user = metadata["user_id"]
    for name, value in body.items():
        if name in GATEWAY_ONLY or name in ("messages", "system", "thinking"):
            continue
        if name in NO_CHAT:
            if value is None or value in NO_CHAT[name]:
                continue
            raise refuse(
                name, "has no chat-completions equivalent, so this gateway cannot honour it."
            )
        if value is None:
            continue
        if name == "max_tokens":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise refuse(
                    name,
                    "must be at least 1: 0 (only warm the prompt cache) has no "
                    "chat-completions equivalent.",
                    code="invalid_value",
                )
            chat["max_tokens"] = value
        elif name == "context_management":
            _context_management(value)
        elif name == "tools":
            if value:
                chat["tools"] = _tools(value)
        elif name == "tool_choice":
            chat["tool_choice"] = _tool_choice(value, wants)
        elif name in ("output_config", "output_format"):
            if name == "output_format":  # the structured-outputs beta's name for it
                chat["response_format"] = _format(value, "output_format")
            else:
                _output_config(value, chat)
        elif name == "stream":
            if value and not count:
                chat["stream"] = True
                chat["stream_options"] = {"include_usage": True}
        elif name != "chat_template_kwargs":
            chat[name] = value
    _thinking(body, chat, wants)
    if count:
        chat["max_tokens"] = 1
    messages = to_messages(body.get("messages"), system=body.get("system"))
    if not any(m["role"] != "system" for m in messages):
        raise InvalidRequest(
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    chat["messages"] = messages
    return chat, wants
