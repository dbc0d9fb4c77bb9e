"""A one-line progress bar on a terminal; silent when stderr is a file or a pipe."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """``[#####.....] 23/74 /v1/chat/completions seed`` redrawn in place."""

    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.width = width
        self.done = 0
        self.label = ""
        self._shown = 0

    def update(self, *, done: int | None = None, label: str | None = None) -> None:
        """Move the bar to ``done`` requests and/or change the label, then redraw."""
        if done is not None:
            self.done = min(done, self.total)
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        line = (
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {self.label}"
        )
        padding = " " * max(0, self._shown - len(line))
        self.stream.write(line + padding)
        self.stream.flush()
        self._shown = len(line)

    def close(self) -> None:
        """Clear the bar's line."""
        if self.enabled and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0
