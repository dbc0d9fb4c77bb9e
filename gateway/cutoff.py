"""Ending one request early: the client left, the body took too long, the drain expired.

anyio's task groups and cancel scopes do this generally and cost over 100 us a
request (measured: a task group with one watcher task, against 7 us for a bare
task); the proxy needs only "cancel my own task, and tell me why". A Cutoff
cancels the task it was made in, at most once per reason handled, and the code
that catches the CancelledError asks ``caught()`` whether the cut was its own:
then the cancellation is undone and the request carries on to answer for it.
A cancellation from anywhere else (server shutdown) is left alone.
"""

from __future__ import annotations

import asyncio


class Cutoff:
    """Cancels the current task for a named reason; ``caught()`` says which, and undoes it."""

    __slots__ = ("_task", "_armed", "reason")

    def __init__(self, task: asyncio.Task[object] | None = None) -> None:
        """``task``: the current task, where the caller has it (a request makes two)."""
        if task is None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a Cutoff belongs to a task")
        self._task = task
        self._armed = True
        self.reason: str | None = None

    def cut(self, reason: str) -> None:
        """Cancel the task for ``reason`` (ignored once disarmed, or while a cut is pending)."""
        if self._armed and self.reason is None:
            self.reason = reason
            self._task.cancel()

    def cancel(self) -> None:
        """The drain's way in (see drain.py): cut for shutdown."""
        self.cut("shutdown")

    @property
    def armed(self) -> bool:
        """Whether a cut would still cancel the task."""
        return self._armed

    def disarm(self) -> None:
        """No more cuts: what follows must run to its end (closing the engine's answer)."""
        self._armed = False

    def caught(self) -> str | None:
        """Call on CancelledError: the reason if the cut was ours (then undone), else None."""
        reason = self.reason
        if reason is not None:
            self.reason = None
            self._task.uncancel()
        return reason

    def settled(self) -> bool:
        """Disarm; True if no cut came (then ``settle`` has nothing to wait for, and the
        caller saves its await: most requests)."""
        self._armed = False
        return self.reason is None

    async def settle(self) -> str | None:
        """At the end of the work: disarm, and take a cut that came after the last
        suspension point (still pending in the task) here rather than in an await of
        whoever runs next."""
        self._armed = False
        if self.reason is None:
            return None
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            return self.caught()
        return None
