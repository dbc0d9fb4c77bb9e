"""The answer's text as the Messages API tells it, piece by piece as it streams.

Two things a chat engine's text does not say that Anthropic's answer does:

- ``InlineThinking``: where an engine's template thinks in its text (Qwen3's,
  ft serve's: the answer starts ``<think>\\n...\\n</think>\\n\\n``) and the
  request asked for thinking, the thought is a thinking block and the rest the
  text. An engine with a reasoning parser (vLLM, SGLang, llama.cpp) sends
  ``reasoning_content`` apart instead, and its text is text.
- ``StopMatcher``: the stop sequences, matched by the gateway (the engine is not
  told them: translate.py says why), so the answer says which one matched and
  ends right before it, as Anthropic's does.

Each holds back only the tail that could still begin a tag or a stop sequence,
so a stream's text goes out as it comes.
"""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"
THINKING, TEXT = "thinking", "text"
Piece = tuple[str, str]  # (THINKING or TEXT, its text)


def _held(text: str, tag: str) -> int:
    """The length of the longest tail of ``text`` that could begin ``tag``, with the
    newlines before it (a thought's last newline belongs to no block)."""
    size = 0
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            size = n
            break
    while size < len(text) and text[-size - 1] == "\n":
        size += 1
    return size


class InlineThinking:
    """Splits an answer's text into its leading ``<think>`` block and the rest."""

    __slots__ = ("state", "buffer", "thought")

    def __init__(self) -> None:
        self.state = "start"  # start, thinking, after (the newlines after the tag), text
        self.buffer = ""
        self.thought = False  # some of the thought went out

    def feed(self, piece: str) -> list[Piece]:
        """The thinking and text ``piece`` completes."""
        if self.state == TEXT:
            return [(TEXT, piece)] if piece else []
        self.buffer += piece
        out: list[Piece] = []
        if self.state == "start":
            if OPEN.startswith(self.buffer):
                return out  # the tag, still arriving
            if not self.buffer.startswith(OPEN):
                self.state = TEXT
                text, self.buffer = self.buffer, ""
                return [(TEXT, text)]
            self.buffer = self.buffer[len(OPEN) :]
            self.state = THINKING
        if self.state == THINKING:
            if not self.thought:
                self.buffer = self.buffer.lstrip("\n")
            end = self.buffer.find(CLOSE)
            if end < 0:
                keep = _held(self.buffer, CLOSE)
                thought = self.buffer[: len(self.buffer) - keep]
                self.buffer = self.buffer[len(thought) :]
                if not thought:
                    return []
                self.thought = True
                return [(THINKING, thought)]
            thought = self.buffer[:end].rstrip("\n")
            if thought:
                out.append((THINKING, thought))
            self.buffer = self.buffer[end + len(CLOSE) :]
            self.state = "after"
        rest = self.buffer.lstrip("\n")
        if rest:
            self.state = TEXT
            out.append((TEXT, rest))
        self.buffer = ""
        return out

    def finish(self) -> list[Piece]:
        """What is still held when the text ends (an unclosed thought is a thought)."""
        held, self.buffer = self.buffer, ""
        if not held:
            return []
        if self.state == "start":
            return [(TEXT, held)]
        if self.state == THINKING:
            held = held.rstrip("\n")
            return [(THINKING, held)] if held else []
        return []


class StopMatcher:
    """The text up to the first stop sequence; ``matched`` says which one ended it."""

    __slots__ = ("stops", "longest", "held", "matched")

    def __init__(self, stops: list[str]) -> None:
        self.stops = stops
        self.longest = max((len(s) for s in stops), default=0)
        self.held = ""
        self.matched: str | None = None

    def feed(self, piece: str) -> str:
        """The text that may go out now (nothing once a stop sequence matched)."""
        if self.matched is not None:
            return ""
        if not self.stops:
            return piece
        text = self.held + piece
        first, which = len(text), None
        for stop in self.stops:
            at = text.find(stop)
            if 0 <= at < first:
                first, which = at, stop
        if which is not None:
            self.matched = which
            self.held = ""
            return text[:first]
        keep = 0
        for n in range(min(self.longest - 1, len(text)), 0, -1):
            tail = text[-n:]
            if any(s.startswith(tail) for s in self.stops):
                keep = n
                break
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def finish(self) -> str:
        """What is still held when the text ends without a match."""
        held, self.held = self.held, ""
        return "" if self.matched is not None else held
