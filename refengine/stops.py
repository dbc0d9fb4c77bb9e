"""Stop strings on a growing text: what may be sent now, and where the text ends."""

from __future__ import annotations


class StopScanner:
    """Holds back any tail that could still become a stop string."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._longest = max((len(s) for s in self._stops), default=0)
        self._text = ""
        self._sent = 0

    def feed(self, piece: str) -> tuple[str, bool]:
        """Add ``piece``; return (text safe to send now, whether a stop string was hit)."""
        self._text += piece
        if not self._stops:
            return self._take(len(self._text)), False
        # Every tail that could begin a stop string was held back, so a match starts
        # at or after the first unsent character.
        hits = [i for i in (self._text.find(s, self._sent) for s in self._stops) if i >= 0]
        if hits:
            end = min(hits)
            self._text = self._text[:end]
            return self._take(end), True
        return self._take(len(self._text) - self._pending_prefix()), False

    def flush(self) -> str:
        """Everything not sent yet (the text ended without a stop string)."""
        return self._take(len(self._text))

    def _pending_prefix(self) -> int:
        """Length of the longest tail of the text that begins some stop string."""
        for size in range(min(self._longest - 1, len(self._text)), 0, -1):
            tail = self._text[-size:]
            if any(s.startswith(tail) for s in self._stops):
                return size
        return 0

    def _take(self, end: int) -> str:
        out = self._text[self._sent : end]
        self._sent = max(self._sent, end)
        return out
