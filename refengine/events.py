"""What a row of the batch sends its request handler, one event per piece of the answer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    """The row's last event: why it ended."""

    reason: str  # "stop" | "length" | "tool_calls"


@dataclass(frozen=True)
class ToolCallStart:
    """A tool call begins: its position among the answer's calls, its id and function."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolArguments:
    """A piece of the arguments (JSON text) of call ``index``."""

    index: int
    text: str


# One step of a scripted answer (structured outputs, tool calls): text or a call's piece.
Piece = str | ToolCallStart | ToolArguments
RowEvent = Piece | Finished
