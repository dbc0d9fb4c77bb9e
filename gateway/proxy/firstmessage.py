"""The request's first message, taken at once when the server already has it.

The body time-out (a timer armed and cancelled, a Cutoff) is a tenth of a small
request's work in the gateway, and most requests do not need it: a body that
came with its head is in the server's buffer before the endpoint runs, and the
server's ``receive()`` returns it without waiting. ``take_first`` runs the
server's ``receive()`` coroutine one step: if it finished, its message is there
and the caller arms nothing; if it waits, the step is kept (``Resumed``), and the
caller awaits the rest of it under its time-out, as it would have awaited the
coroutine itself (the task is given what the server's coroutine waits on, and
sends and throws, a cancellation included, reach that coroutine unchanged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any

from gateway._types import Message, Receive


class Resumed:
    """The rest of a coroutine that was run one step and waits on ``waits_on``."""

    __slots__ = ("_coroutine", "_waits_on")

    def __init__(self, coroutine: Coroutine[Any, Any, Message], waits_on: Any) -> None:
        self._coroutine = coroutine
        self._waits_on = waits_on

    def __await__(self) -> Generator[Any, Any, Message]:
        coroutine, waits_on = self._coroutine, self._waits_on
        while True:
            try:
                sent = yield waits_on
            except BaseException as exc:  # thrown in by the task: a cancellation
                try:
                    waits_on = coroutine.throw(exc)
                except StopIteration as done:
                    message: Message = done.value
                    return message
            else:
                try:
                    waits_on = coroutine.send(sent)
                except StopIteration as done:
                    message = done.value
                    return message


def take_first(receive: Receive) -> tuple[Message | None, Awaitable[Message] | None]:
    """The first message if the server has it now (and None), else None and what is
    left to await for it."""
    pending = receive()
    if type(pending) is not CoroutineType:
        return None, pending  # not a plain coroutine (no server we know): awaited as it is
    try:
        waits_on = pending.send(None)
    except StopIteration as done:
        return done.value, None
    return None, Resumed(pending, waits_on)
