"""A Responses request as a chat-completions request, translated exactly or refused.

Runs on a body the policy has let through (policies/ft-serve.yaml's
``/v1/responses`` route), so what reaches here is what the deployment
accepts; what the chat API has no way to say is still a 400 that names the
field, whatever the policy: a field passed to a chat engine that cannot act on
it would be ignored without a word, the bug this gateway exists to stop.
Fields this module does not name are engine extensions the policy passes
(``seed``, ``top_k``, ``chat_template_kwargs``, ...): forwarded as they are.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest

# Kept by the gateway and echoed in the answer; never sent to the engine. The cache
# hints and Codex's access_programs ask nothing an engine's automatic prefix cache or
# this gateway could act on; parallel_tool_calls is enforced here (onecall.py).
GATEWAY_ONLY = frozenset(
    {
        "store",
        "previous_response_id",
        "metadata",
        "client_metadata",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "access_programs",
        "service_tier",
        "stream_options",
        "truncation",
        "include",
        "parallel_tool_calls",
    }
)
# include entries the gateway can honour: reasoning items come back without a blob
# (see docs/responses.md: the engine's template drops earlier reasoning, so there is
# nothing to carry), which is what a client that asks must be ready for.
INCLUDABLE = frozenset({"reasoning.encrypted_content"})
# reasoning.summary values accepted: the reasoning item carries the engine's whole
# reasoning text (content), and its summary list stays empty.
_SUMMARIES = frozenset({"auto", "concise", "detailed"})
# Responses features with no chat-completions equivalent: refused unless neutral.
_NO_CHAT = {
    "background": (False,),
    "conversation": (),
    "prompt": (),
    "max_tool_calls": (),
    "context_management": ([],),
    "moderation": (),
    "image": (),
}
_PART_TYPES = {"input_text": "text", "output_text": "text"}


# Ids need to be unique, not secret (a stored response is visible only to its owner):
# a generator seeded from the OS, reseeded in a forked worker, draws them several
# times faster than a system call per id.
_IDS = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _IDS.seed(os.urandom(32)))


def new_id(prefix: str) -> str:
    """An OpenAI-style id: ``resp_``, ``msg_``, ``fc_`` and 48 hex digits."""
    return f"{prefix}_{_IDS.getrandbits(192):048x}"


def _refuse(param: str, why: str, *, code: str = "unsupported_parameter") -> InvalidRequest:
    return InvalidRequest(f"Unsupported parameter: '{param}' {why}", param=param, code=code)


def input_items(
    value: Any, *, ids: bool = True, make_id: Callable[[str], str] = new_id
) -> list[dict[str, Any]]:
    """The request's ``input`` as items, each with ``type`` and (``ids``: for the store,
    as ``input_items`` lists them) an ``id`` from ``make_id``: a string is one user
    message with one input_text part."""
    if isinstance(value, str):
        item: dict[str, Any] = {"type": "message", "role": "user", "content": value}
        if ids:
            item["content"] = [{"type": "input_text", "text": value}]
            item["id"] = make_id("msg")
        return [item]
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(
            "Invalid type for 'input': expected a string or an array of items.",
            param="input",
            code="invalid_type",
        )
    items: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidRequest(
                f"Invalid type for 'input[{index}]': expected an object.",
                param=f"input[{index}]",
                code="invalid_type",
            )
        out: dict[str, Any] = dict(item)
        kind = out.setdefault("type", "message")
        if not ids:
            items.append(out)
            continue
        if "id" not in out:
            out["id"] = make_id("fc" if kind == "function_call" else "msg")
        if kind == "message":
            content = out.get("content")
            if isinstance(content, str):
                part = "output_text" if out.get("role") == "assistant" else "input_text"
                out["content"] = [{"type": part, "text": content}]
        items.append(out)
    return items


def _content(content: Any, where: str) -> str | list[dict[str, Any]]:
    """Responses content parts as chat content: one text part is the plain string (what
    a chat client sends), several are chat parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _PART_TYPES:
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "refusal":
            parts.append({"type": "refusal", "refusal": part.get("refusal", "")})
        elif kind == "input_image":
            image = {"url": part.get("image_url") or part.get("file_id")}
            if part.get("detail") is not None:
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        elif kind == "input_file":
            file = {k: part[k] for k in ("file_data", "file_id", "filename") if k in part}
            parts.append({"type": "file", "file": file})
        else:
            raise _refuse(
                f"{where}[{index}].type",
                f"cannot be translated to chat completions ('{kind}').",
                code="unsupported_value",
            )
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _output_text(output: Any) -> Any:
    if isinstance(output, str):
        return output
    return _content(output, "output")


def _field(item: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = str) -> Any:
    """``item[key]`` checked (a policy that passes items unchecked still gets a 400)."""
    value = item.get(key)
    if value is None:
        path = f"{where}.{key}"
        raise InvalidRequest(
            f"Missing required parameter: '{path}'.", param=path, code="missing_required_parameter"
        )
    if not isinstance(value, kind):
        path = f"{where}.{key}"
        raise InvalidRequest(f"Invalid type for '{path}'.", param=path, code="invalid_type")
    return value


def to_messages(items: list[dict[str, Any]], *, first: int = 0) -> list[dict[str, Any]]:
    """Input items as chat messages; ``first``: the index of ``items[0]`` in the request
    (earlier items came from the store), so a refusal names the client's own path."""
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"input[{index - first}]" if index >= first else "previous_response_id"
        kind = item.get("type", "message")
        if kind == "message":
            role = _field(item, "role", where)
            content = _field(item, "content", where, (str, list))
            messages.append({"role": role, "content": _content(content, f"{where}.content")})
        elif kind == "function_call":
            call = {
                "id": _field(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _field(item, "name", where),
                    "arguments": _field(item, "arguments", where),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "reasoning":
            # An earlier answer's reasoning (from the store, or sent back by a client the
            # policy lets): chat engines take none back (vLLM: never send reasoning_content
            # in a request), so it is left out, as their chat templates leave it out.
            continue
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": _field(item, "call_id", where),
                    "content": _output_text(item.get("output", "")),
                }
            )
        else:
            raise _refuse(
                f"{where}.type",
                f"cannot be translated to chat completions (item type '{kind}').",
                code="unsupported_value",
            )
    return messages


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise _refuse(
                f"tools[{index}].type",
                f"is not supported: the engine has no built-in tool '{tool.get('type')}'.",
                code="unsupported_value",
            )
        function = {"name": _field(tool, "name", f"tools[{index}]")}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise _refuse(
        "tool_choice",
        f"cannot be translated to chat completions (type '{choice.get('type')}').",
        code="unsupported_value",
    )


def _response_format(fmt: dict[str, Any]) -> dict[str, Any] | None:
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise _refuse("text.format.type", f"cannot be translated ('{kind}').", code="unsupported_value")


def _reasoning(reasoning: dict[str, Any], chat: dict[str, Any]) -> None:
    for key, value in reasoning.items():
        if value is None:
            continue
        if key == "effort":
            chat["reasoning_effort"] = value
        elif key == "summary" and value in _SUMMARIES:
            continue
        else:
            raise _refuse(f"reasoning.{key}", "has no chat-completions equivalent for this engine.")


def to_chat(
    body: dict[str, Any],
    items: list[dict[str, Any]],
    *,
    first: int,
    instructions_role: str = "system",
) -> dict[str, Any]:
    """The chat-completions body for a policy-approved Responses ``body`` whose whole
    conversation (stored history, then this request's input) is ``items``;
    ``instructions`` become the first message, in ``instructions_role``."""
    chat: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    for name, value in body.items():
        if name in GATEWAY_ONLY or name == "input":
            continue
        if name in _NO_CHAT:
            if value is None or value in _NO_CHAT[name]:
                continue
            raise _refuse(
                name, "has no chat-completions equivalent, so this gateway cannot honour it."
            )
        if value is None:
            continue
        if name == "instructions":
            messages.append({"role": instructions_role, "content": value})
        elif name == "max_output_tokens":
            chat["max_tokens"] = value
        elif name == "text":
            fmt = value.get("format")
            if fmt is not None:
                response_format = _response_format(fmt)
                if response_format is not None:
                    chat["response_format"] = response_format
            if value.get("verbosity") is not None:
                chat["verbosity"] = value["verbosity"]
        elif name == "tools":
            if value:
                chat["tools"] = _tools(value)
        elif name == "tool_choice":
            chat["tool_choice"] = _tool_choice(value)
        elif name == "reasoning":
            _reasoning(value, chat)
        elif name == "top_logprobs":
            if value:
                raise _refuse(name, "is not translated by this gateway yet.")
        elif name == "stream":
            chat["stream"] = value
            if value:
                chat["stream_options"] = {"include_usage": True}
        else:
            chat[name] = value
    for index, entry in enumerate(body.get("include") or ()):
        if entry not in INCLUDABLE:
            raise _refuse(f"include[{index}]", f"cannot be produced by this gateway ('{entry}').")
    if body.get("truncation") not in (None, "disabled"):
        raise _refuse("truncation", "'auto' is not supported: the gateway never truncates input.")
    messages.extend(to_messages(items, first=first))
    chat["messages"] = messages
    return chat
