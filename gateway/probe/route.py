"""The two generation routes as the probe sees them: request bodies and answer texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.probe.client import DONE, Answer
from gateway.probe.verdict import Trial, compact, quote, trim

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
# Short and ordinary, so any model answers with plain prose (not JSON, not code).
CHAT_PROMPT = "Tell me about Python lists."
COMPLETION_PROMPT = "A list in Python is"
BASE_MAX_TOKENS = 16


@dataclass(frozen=True)
class ProbeRoute:
    """One route: its base request and how to read its answers."""

    path: str
    model: str
    extra: dict[str, Any]

    @property
    def is_chat(self) -> bool:
        return self.path == CHAT

    def body(self, **fields: Any) -> dict[str, Any]:
        """The base request (model, prompt, max_tokens, ``extra``) with ``fields`` laid over."""
        base: dict[str, Any] = {"model": self.model}
        if self.is_chat:
            base["messages"] = [{"role": "user", "content": CHAT_PROMPT}]
        else:
            base["prompt"] = COMPLETION_PROMPT
        base["max_tokens"] = BASE_MAX_TOKENS
        return base | self.extra | fields

    def texts(self, answer: Answer) -> list[str | None]:
        """The text of each choice of a non-streaming answer, in index order."""
        choices = answer.body.get("choices") if isinstance(answer.body, dict) else None
        if not isinstance(choices, list):
            return []
        out: list[str | None] = []
        for choice in choices:
            if not isinstance(choice, dict):
                out.append(None)
            elif self.is_chat:
                message = choice.get("message")
                content = message.get("content") if isinstance(message, dict) else None
                out.append(content if isinstance(content, str) else None)
            else:
                text = choice.get("text")
                out.append(text if isinstance(text, str) else None)
        return out

    def text(self, answer: Answer) -> str | None:
        """The first choice's text (None when the answer has none)."""
        texts = self.texts(answer)
        return texts[0] if texts else None

    def stream_text(self, answer: Answer) -> str:
        """The text of choice 0 put together from a stream's deltas."""
        parts: list[str] = []
        for event in answer.events or []:
            if not isinstance(event, dict):
                continue
            for choice in event.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                if self.is_chat:
                    delta = choice.get("delta")
                    piece = delta.get("content") if isinstance(delta, dict) else None
                else:
                    piece = choice.get("text")
                if isinstance(piece, str):
                    parts.append(piece)
        return "".join(parts)

    def trial(self, answer: Answer, note: str = "", *, counted: bool = False) -> Trial:
        """Evidence for one request: the fields beyond the base request, and the answer.
        ``counted``: a check that counts prompt tokens (inside messages), so the messages
        are shown at more length and the answer with its prompt tokens."""
        base = self.body()
        shown = {k: _shortened(v) for k, v in answer.sent.items() if base.get(k, _ABSENT) != v}
        got = describe(self, answer, counted=counted)
        return Trial(compact(shown, 480 if counted else 160), f"{got}; {note}" if note else got)


_ABSENT = object()
_LONG_STRING = 64


def _shortened(value: Any) -> Any:
    """``value`` with long strings inside it (a data: URL) cut, for the evidence."""
    if isinstance(value, str):
        return trim(value, _LONG_STRING)
    if isinstance(value, list):
        return [_shortened(v) for v in value]
    if isinstance(value, dict):
        return {k: _shortened(v) for k, v in value.items()}
    return value


def completion_tokens(answer: Answer) -> int | None:
    """usage.completion_tokens of a non-streaming answer, when the engine reports it."""
    return _usage(answer, "completion_tokens")


def prompt_tokens(answer: Answer) -> int | None:
    """usage.prompt_tokens of a non-streaming 2xx answer, when the engine reports it."""
    return _usage(answer, "prompt_tokens") if answer.ok else None


def _usage(answer: Answer, name: str) -> int | None:
    usage = answer.body.get("usage") if isinstance(answer.body, dict) else None
    tokens = usage.get(name) if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def describe(route: ProbeRoute, answer: Answer, *, counted: bool = False) -> str:
    """A one-line summary of an answer for the evidence."""
    if answer.status is None:
        return f"no answer: {answer.error}"
    if not answer.ok:
        return f"HTTP {answer.status}: {trim(answer.engine_message(), 120)}"
    if answer.events is not None:
        done = "ends with [DONE]" if answer.events and answer.events[-1] == DONE else "no [DONE]"
        return (
            f"200 event stream, {len(answer.events)} events, {done}, "
            f"text {quote(route.stream_text(answer))}"
        )
    if not isinstance(answer.body, dict):
        return f"200, not JSON: {quote(answer.raw)}"
    texts = route.texts(answer)
    parts = [f"200, {len(texts)} choice{'s' if len(texts) != 1 else ''}"]
    if texts:
        parts.append(f"text {quote(texts[0])}")
    if counted:
        prompt = prompt_tokens(answer)
        parts.append(f"{prompt} prompt tokens" if prompt is not None else "no prompt_tokens")
    tokens = completion_tokens(answer)
    if tokens is not None:
        parts.append(f"{tokens} tokens")
    return ", ".join(parts)
