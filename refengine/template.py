"""The chat template: Qwen3-style ChatML, with its thinking switch.

``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, then
``<|im_start|>assistant\\n``. With ``chat_template_kwargs: {"enable_thinking": false}``
the prompt also gets an empty ``<think>\\n\\n</think>\\n\\n`` block, as Qwen3's
template does, and the answer starts at once. With thinking on (the default) the
engine makes the model write a short thought first: the reply's text starts with
``<think>\\n...\\n</think>\\n\\n`` (those tokens count as completion tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refengine.tokenizer import IM_END, IM_START, THINK_END, THINK_START


def message_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def render_chat(messages: Sequence[dict[str, Any]], *, enable_thinking: bool) -> str:
    """The prompt text for ``messages``."""
    parts = [
        f"{IM_START}{message['role']}\n{message_text(message.get('content'))}{IM_END}\n"
        for message in messages
    ]
    parts.append(f"{IM_START}assistant\n")
    if not enable_thinking:
        parts.append(f"{THINK_START}\n\n{THINK_END}\n\n")
    return "".join(parts)
