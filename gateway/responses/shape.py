"""OpenAI's ``response`` object: the request's parameters echoed, the output, the usage.

The field list follows openai-python's ``Response`` model (types/responses/response.py):
what the real API returns, so that the SDK parses every answer. Parameters the
client left out are echoed as the API echoes them (``tools: []``, ``tool_choice:
"auto"``, ``truncation: "disabled"``, ...), except sampling values the engine
chooses itself: an absent temperature or top_p is null, not a default the
gateway cannot vouch for.
"""

from __future__ import annotations

import time
from typing import Any

# chat finish_reason -> (status, incomplete_details.reason)
_FINISH = {
    "stop": ("completed", None),
    "tool_calls": ("completed", None),
    "function_call": ("completed", None),
    "length": ("incomplete", "max_output_tokens"),
    "content_filter": ("incomplete", "content_filter"),
}


def finish_status(reason: str | None) -> tuple[str, str | None]:
    """The response status, and the incomplete reason, for a chat ``finish_reason``."""
    return _FINISH.get(reason or "stop", ("completed", None))


def usage_of(chat_usage: Any) -> dict[str, Any] | None:
    """Chat usage as Responses usage (with both details objects)."""
    if not isinstance(chat_usage, dict):
        return None
    prompt = int(chat_usage.get("prompt_tokens") or 0)
    completion = int(chat_usage.get("completion_tokens") or 0)
    prompt_details = chat_usage.get("prompt_tokens_details") or {}
    completion_details = chat_usage.get("completion_tokens_details") or {}
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": int(prompt_details.get("cached_tokens") or 0),
            "cache_write_tokens": 0,
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0)
        },
        "total_tokens": int(chat_usage.get("total_tokens") or prompt + completion),
    }


def message_item(item_id: str, text: str, *, status: str) -> dict[str, Any]:
    """An assistant ``message`` output item with one ``output_text`` part."""
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [text_part(text)],
    }


def text_part(text: str) -> dict[str, Any]:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(item_id: str, text: str, *, status: str) -> dict[str, Any]:
    """A ``reasoning`` output item: the engine's reasoning text (``reasoning_content``)."""
    return {
        "id": item_id,
        "type": "reasoning",
        "status": status,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def reasoning_of(source: dict[str, Any]) -> str | None:
    """The reasoning text of a chat message or delta (vLLM and SGLang's reasoning parsers
    put it in ``reasoning_content``; newer vLLM in ``reasoning``)."""
    text = source.get("reasoning_content")
    if text is None:
        text = source.get("reasoning")
    return text if isinstance(text, str) and text else None


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, *, status: str
) -> dict[str, Any]:
    """A ``function_call`` output item."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def response_object(
    response_id: str,
    request: dict[str, Any],
    *,
    created_at: float,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
    stored: bool = False,
) -> dict[str, Any]:
    """The ``response`` object for ``request`` (the Responses body as the policy passed it)."""
    text = request.get("text") or {}
    reasoning = request.get("reasoning") or {}
    done = status in ("completed", "incomplete", "failed")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "completed_at": int(time.time()) if status == "completed" else None,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": request.get("max_tool_calls"),
        "metadata": request.get("metadata") or {},
        "model": request.get("model"),
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True) is not False,
        "previous_response_id": request.get("previous_response_id"),
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": request.get("safety_identifier"),
        # One tier here, whatever was asked: the answer says which one served it.
        "service_tier": "default",
        "store": stored,
        "temperature": request.get("temperature"),
        "text": {
            "format": text.get("format") or {"type": "text"},
            "verbosity": text.get("verbosity") or "medium",
        },
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "top_logprobs": request.get("top_logprobs") or 0,
        "top_p": request.get("top_p"),
        "truncation": request.get("truncation") or "disabled",
        "usage": usage if done else None,
        "user": request.get("user"),
    } | ({"client_metadata": request["client_metadata"]} if "client_metadata" in request else {})


def output_of(chat: dict[str, Any], new_id: Any) -> tuple[list[dict[str, Any]], str, str | None]:
    """A whole chat completion's first choice as output items, status, incomplete reason.
    ``new_id(prefix)`` makes the items' ids."""
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    status, incomplete = finish_status(choice.get("finish_reason"))
    item_status = "incomplete" if status == "incomplete" else "completed"
    output: list[dict[str, Any]] = []
    reasoning = reasoning_of(message)
    if reasoning is not None:
        output.append(reasoning_item(new_id("rs"), reasoning, status=item_status))
    content = message.get("content")
    if isinstance(content, str) and content:
        output.append(message_item(new_id("msg"), content, status=item_status))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        output.append(
            call_item(
                new_id("fc"),
                str(call.get("id") or new_id("call")),
                str(function.get("name") or ""),
                str(function.get("arguments") or ""),
                status=item_status,
            )
        )
    if not any(item["type"] != "reasoning" for item in output):
        output.append(message_item(new_id("msg"), "", status=item_status))
    return output, status, incomplete
