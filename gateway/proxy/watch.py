"""Watching for the client leaving while the engine works, without a task.

The server tells of a hang-up through ``receive()``, which must be awaited while
the request's own task awaits the engine. A task per request for that wait was
the dearest thing the default path did (registered in the loop's set of tasks,
stepped, cancelled at the end: a cancellation is an exception thrown through its
frames), about an eighth of a small request's work in the gateway. A Watch runs
the server's ``receive()`` coroutine itself, a step at a time, from the done
callback of the future that coroutine waits on, as a task would, but with
nothing to register and nothing to cancel: at the end it is closed.

A coroutine that waits on anything but an asyncio future (an ``await sleep(0)``,
another framework's primitive) is handed to a task for the rest of its run, so a
server other than uvicorn is watched as before.

The gateway's own server needs no coroutine at all: its ``receive`` belongs to a
cycle (serving/cycle.py) with ``watch_disconnect``, which calls back when the
connection is lost. Stepping the server's coroutine cost a served chat request
a twentieth of its instructions (420,890 with it, 401,272 with the callback: a
future to wait on, the wake-up when the answer completes, the coroutine's close
thrown through its frames).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from types import CoroutineType
from typing import Any

from gateway._types import Message, Receive
from gateway.proxy.firstmessage import Resumed

logger = logging.getLogger("gateway")


class Watch:
    """Calls ``left(*args)`` if ``receive()`` says the client disconnected, until closed."""

    __slots__ = (
        "_receive",
        "_left",
        "_args",
        "_coroutine",
        "_waits_on",
        "_task",
        "_closed",
        "_watch_disconnect",
    )

    def __init__(self, receive: Receive, left: Callable[..., None], *args: Any) -> None:
        self._receive = receive
        self._left = left
        self._args = args
        self._coroutine: Coroutine[Any, Any, Message] | None = None
        self._waits_on: asyncio.Future[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        watch = getattr(getattr(receive, "__self__", None), "watch_disconnect", None)
        self._watch_disconnect: Callable[[Callable[[], None] | None], None] | None = watch
        if watch is not None:  # the gateway's server: told of a hang-up, nothing to step
            watch(self._hung_up)
            return
        self._next()

    def close(self) -> None:
        """Stop watching: the server's coroutine is closed where it waits."""
        self._closed = True
        if self._watch_disconnect is not None:
            self._watch_disconnect(None)
            self._watch_disconnect = None
            return
        if self._waits_on is not None:
            self._waits_on.remove_done_callback(self._wake)
            self._waits_on = None
        if self._coroutine is not None:
            self._coroutine.close()
            self._coroutine = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _hung_up(self) -> None:
        if not self._closed:
            self._left(*self._args)

    def _next(self) -> None:
        """Start on the next message."""
        pending = self._receive()
        if type(pending) is not CoroutineType:
            self._hand_over(pending)
            return
        self._coroutine = pending
        self._step()

    def _wake(self, future: asyncio.Future[Any]) -> None:
        self._waits_on = None
        if not self._closed:
            self._step()

    def _step(self) -> None:
        coroutine = self._coroutine
        assert coroutine is not None
        try:
            waits_on = coroutine.send(None)
        except StopIteration as done:
            self._coroutine = None
            self._received(done.value)
            return
        except Exception:
            self._coroutine = None
            logger.debug("the server's receive() failed while watching", exc_info=True)
            return
        if isinstance(waits_on, asyncio.Future) and waits_on._asyncio_future_blocking:
            # What a task does with what its coroutine waits on.
            waits_on._asyncio_future_blocking = False
            self._waits_on = waits_on
            waits_on.add_done_callback(self._wake)
            return
        self._coroutine = None
        self._hand_over(Resumed(coroutine, waits_on))

    def _received(self, message: Message) -> None:
        if message["type"] == "http.disconnect":
            self._left(*self._args)
        elif not self._closed:
            self._next()

    def _hand_over(self, rest: Any) -> None:
        """The rest of the watch in a task (a receive() this class cannot step)."""

        async def watch() -> None:
            message: Message = await rest
            while message["type"] != "http.disconnect":
                message = await self._receive()
            self._left(*self._args)

        self._task = asyncio.get_running_loop().create_task(watch())
