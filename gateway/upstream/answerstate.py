"""One request on a kept-alive engine connection, as the httptools client parses its
answer: the head, the body bytes not yet read, the end, a failure, and the reader's waiter."""

from __future__ import annotations

import asyncio

from gateway._types import Headers
from gateway.errors import UpstreamError


class AnswerState:
    """One request on a connection: head, body buffer, end, failure."""

    __slots__ = (
        "status",
        "headers",
        "buffer",
        "buffered",
        "head_done",
        "ended",
        "failure",
        "waiter",
        "until_close",
        "keep_alive",
        "encoded",
    )

    def __init__(self) -> None:
        self.status = 0
        self.headers: Headers = []
        # A list, not a deque: a deque costs 760 bytes empty, and this holds what
        # arrived since the reader last looked (taken all at once).
        self.buffer: list[bytes] = []
        self.buffered = 0
        self.head_done = False
        self.ended = False
        self.failure: UpstreamError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.until_close = False
        self.keep_alive = False
        self.encoded = False  # the answer has a Content-Encoding header

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)
