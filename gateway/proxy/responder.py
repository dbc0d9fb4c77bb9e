"""Sending one response, and remembering how far it got."""

from __future__ import annotations

from typing import ClassVar

from gateway._types import Headers, Send
from gateway.errors import OPENAI_ERRORS, ErrorShape, GatewayError, render


class Responder:
    """Sends one response; remembers whether it started. ``errors``: the API's error
    shape (a route whose clients speak another API has a subclass with its own)."""

    errors: ClassVar[ErrorShape] = OPENAI_ERRORS

    def __init__(self, send: Send, request_id: bytes) -> None:
        self._send = send
        self.request_id = request_id
        self.started = False
        self.complete = False
        self.status = 0
        self.bytes_out = 0
        self.extra: Headers = []  # sent with any answer (the rate-limit headers)

    async def start(self, status: int, headers: Headers) -> None:
        self.started = True
        self.status = status
        headers.append((b"x-request-id", self.request_id))
        if self.extra:
            headers.extend(self.extra)
        send = self._send  # (an attribute, not a method: loaded as one, it is a specialised read)
        await send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, *, more: bool = False) -> None:
        self.bytes_out += len(data)
        self.complete = not more
        send = self._send
        await send({"type": "http.response.body", "body": data, "more_body": more})

    async def error(self, exc: GatewayError) -> None:
        shape = self.errors
        payload = render(exc, shape=shape, request_id=self.request_id.decode())
        headers: Headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        headers.extend((k.lower().encode(), v.encode()) for k, v in exc.headers.items())
        await self.start(shape.status(exc), headers)
        await self.body(payload)
