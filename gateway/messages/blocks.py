"""A Messages request's conversation (``system`` and ``messages``) as chat messages.

Content blocks become chat parts and messages exactly, or a 400 names the block:
text as text parts (one becomes the plain string, what a chat client sends), an
image as an ``image_url`` part (its data as a ``data:`` URL), an assistant's
``tool_use`` as a ``tool_calls`` entry (its input as a JSON string), a user's
``tool_result`` as a ``tool`` message before the rest of the turn, a ``system``
message inside ``messages`` as a chat system message where it stands.
Consecutive turns of one role are joined, as Anthropic joins them. Thinking
blocks sent back are left out: chat engines take no reasoning back, and the
templates of these engines (Qwen3's, ft serve's) drop earlier turns' reasoning.
A final assistant message is a prefill the answer continues, which a chat
template would answer in a new turn instead: refused. Claude Code's attribution
block (the first system block, ``x-anthropic-billing-header: ...``) is taken
out, as Anthropic's API takes it out before the model reads the prompt.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import InvalidRequest

# Claude Code's first system block, for Anthropic's billing; Anthropic's API takes it
# out before the model sees the prompt, so the translation does the same.
ATTRIBUTION = "x-anthropic-billing-header:"


def refuse(param: str, why: str, *, code: str = "unsupported_parameter") -> InvalidRequest:
    """The 400 for a field the translation cannot honour."""
    return InvalidRequest(f"Unsupported parameter: '{param}' {why}", param=param, code=code)


def field_of(
    item: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = str
) -> Any:
    """``item[key]`` checked (a policy that passes blocks unchecked still gets a 400)."""
    value = item.get(key)
    path = f"{where}.{key}"
    if value is None:
        raise InvalidRequest(
            f"Missing required parameter: '{path}'.", param=path, code="missing_required_parameter"
        )
    if not isinstance(value, kind):
        raise InvalidRequest(f"Invalid type for '{path}'.", param=path, code="invalid_type")
    return value


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"Invalid type for '{where}': expected a string or an array of content blocks.",
            param=where,
            code="invalid_type",
        )
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            path = f"{where}[{index}]"
            raise InvalidRequest(
                f"Invalid type for '{path}': expected an object.", param=path, code="invalid_type"
            )
    return content


def _no_citations(block: dict[str, Any], where: str) -> None:
    if block.get("citations"):
        raise refuse(f"{where}.citations", "has no chat-completions equivalent.")


def _text(block: dict[str, Any], where: str) -> dict[str, Any]:
    _no_citations(block, where)
    return {"type": "text", "text": field_of(block, "text", where)}


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = field_of(block, "source", where, dict)
    kind = source.get("type")
    if kind == "base64":
        media = field_of(source, "media_type", f"{where}.source")
        data = field_of(source, "data", f"{where}.source")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        return {
            "type": "image_url",
            "image_url": {"url": field_of(source, "url", f"{where}.source")},
        }
    raise refuse(
        f"{where}.source.type", f"cannot be translated to chat completions ('{kind}').",
        code="unsupported_value",
    )  # fmt: skip


def _chat_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Chat content: one text part is the plain string (what a chat client sends)."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    if block.get("is_error"):
        raise refuse(
            f"{where}.is_error",
            "has no chat-completions equivalent (a tool message carries only its content).",
        )
    content = block.get("content", "")
    if isinstance(content, list):
        parts = _text_parts(content, f"{where}.content", "a tool message")
        content = _chat_content(parts) if parts else ""
    elif not isinstance(content, str):
        raise InvalidRequest(
            f"Invalid type for '{where}.content'.", param=f"{where}.content", code="invalid_type"
        )
    return {
        "role": "tool",
        "tool_call_id": field_of(block, "tool_use_id", where),
        "content": content,
    }


def _user(content: Any, where: str) -> list[dict[str, Any]]:
    """A user message as chat messages: its tool results first (tool messages), then
    its other blocks as one user message."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(_blocks(content, f"{where}.content")):
        at = f"{where}.content[{index}]"
        kind = block.get("type")
        if kind == "tool_result":
            if parts:
                raise InvalidRequest(
                    f"Invalid '{at}': tool_result blocks must come before any other content "
                    "of the message.",
                    param=at,
                    code="invalid_value",
                )
            out.append(_tool_result(block, at))
        elif kind == "text":
            parts.append(_text(block, at))
        elif kind == "image":
            parts.append(_image(block, at))
        else:
            raise refuse(
                f"{at}.type",
                f"cannot be translated to chat completions ('{kind}').",
                code="unsupported_value",
            )
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _assistant(content: Any, where: str) -> dict[str, Any] | None:
    """An assistant message as one chat message (None: nothing the engine reads)."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(_blocks(content, f"{where}.content")):
        at = f"{where}.content[{index}]"
        kind = block.get("type")
        if kind == "text":
            parts.append(_text(block, at))
        elif kind == "tool_use":
            if block.get("caller") not in (None, {"type": "direct"}):
                raise refuse(f"{at}.caller", "has no chat-completions equivalent.")
            arguments = field_of(block, "input", at, dict)
            calls.append(
                {
                    "id": field_of(block, "id", at),
                    "type": "function",
                    "function": {
                        "name": field_of(block, "name", at),
                        "arguments": orjson.dumps(arguments).decode(),
                    },
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # left out: the template would drop an earlier turn's reasoning
        else:
            raise refuse(
                f"{at}.type",
                f"cannot be translated to chat completions ('{kind}').",
                code="unsupported_value",
            )
    if not parts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": _chat_content(parts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _text_parts(content: Any, where: str, what: str) -> list[dict[str, Any]]:
    """Text blocks (or a string) as chat text parts; any other block is a 400, as
    ``what`` takes text only."""
    parts = []
    for index, block in enumerate(_blocks(content, where)):
        at = f"{where}[{index}]" if isinstance(content, list) else where
        if block.get("type") != "text":
            raise refuse(
                f"{at}.type",
                f"cannot be translated to chat completions ('{block.get('type')}'): "
                f"{what} takes text blocks only.",
                code="unsupported_value",
            )
        parts.append(_text(block, at))
    return parts


def _system(content: Any, where: str) -> list[dict[str, Any]]:
    parts = _text_parts(content, where, "a system prompt")
    if parts and parts[0]["text"].startswith(ATTRIBUTION):
        return parts[1:]
    return parts


def _merge(messages: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append ``message``, joined to the one before when both are the same role (as
    Anthropic joins consecutive turns of one role)."""
    last = messages[-1] if messages else None
    role = message["role"]
    if last is None or last["role"] != role or role == "tool":
        messages.append(message)
        return
    mine, theirs = last.get("content"), message.get("content")
    if theirs is not None:
        joined = _as_parts(mine) + _as_parts(theirs)
        last["content"] = _chat_content(joined) if joined else None
    if message.get("tool_calls"):
        last.setdefault("tool_calls", []).extend(message["tool_calls"])


def _as_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def to_messages(messages: Any, *, system: Any = None) -> list[dict[str, Any]]:
    """``system`` and ``messages`` as chat messages."""
    out: list[dict[str, Any]] = []
    if system is not None:
        parts = _system(system, "system")
        if parts:
            out.append({"role": "system", "content": _chat_content(parts)})
    if not isinstance(messages, list):
        raise InvalidRequest(
            "Invalid type for 'messages': expected an array.", param="messages", code="invalid_type"
        )
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InvalidRequest(
                f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type"
            )
        role = field_of(message, "role", where)
        content = field_of(message, "content", where, (str, list))
        if role == "user":
            for one in _user(content, where):
                if one["role"] == "user":
                    one["content"] = _chat_content(one["content"])
                _merge(out, one)
        elif role == "assistant":
            if index == len(messages) - 1:
                raise InvalidRequest(
                    f"Unsupported value: '{where}' is a final assistant message (a prefill "
                    "the answer continues), which has no chat-completions equivalent: the "
                    "engine would answer in a new turn after it.",
                    param=where,
                    code="unsupported_value",
                )
            translated = _assistant(content, where)
            if translated is not None:
                _merge(out, translated)
        elif role == "system":
            parts = _system(content, f"{where}.content")
            if parts:
                _merge(out, {"role": "system", "content": _chat_content(parts)})
        else:
            path = f"{where}.role"
            raise InvalidRequest(
                f"Invalid value for '{path}': '{role}'. Supported values are: 'user', "
                "'assistant' and 'system'.",
                param=path,
                code="invalid_value",
            )
    return out
