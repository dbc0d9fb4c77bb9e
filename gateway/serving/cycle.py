"""One request and its answer on a connection: uvicorn's request-response cycle, leaner.

The ASGI side of a request (``receive``, ``send``, running the app) as uvicorn's
httptools protocol has it, with the same rules (the framing an answer's headers
declare, a body no longer than its content-length, ``connection: close`` closing
after the answer, a 500 for an app that fails before it answers), and two
differences that are the reason for it:

- **A whole answer goes out in one write.** uvicorn writes the status line and
  headers when the app starts its answer and the body when it sends it: two
  system calls and two TCP segments for each small answer, which the kernel and
  the client pay for as well. An answer with a content-length (the app sends
  its body right after) is written with its body's first part; a stream's head
  (chunked, or no body to come: HEAD, 204, 304) goes out at once, so a client
  waiting for a stream's headers waits for nothing more.
- **Less Python per message**: one pass over the headers, uvicorn's two checks
  of each header made as one search of all the names and one of all the
  values, slots rather than a dict.

Everything else (reading the body, pausing and resuming the transport, the
keep-alive timer, pipelining) stays uvicorn's protocol's (serving/server.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE

_BAD_NAME = HEADER_RE.search
_BAD_VALUE = HEADER_VALUE_RE.search
_CONTENT_LENGTH = b"content-length"
_TRANSFER_ENCODING = b"transfer-encoding"
_CONNECTION = b"connection"
_FRAMING = frozenset((_CONTENT_LENGTH, _TRANSFER_ENCODING, _CONNECTION))
_SEPARATOR = b": "
_LINE_END = b"\r\n"
_INTERNAL_ERROR = b"Internal Server Error"


class Cycle:
    """A request's ASGI ``receive`` and ``send``, and the app run on them."""

    __slots__ = (
        "scope",
        "transport",
        "flow",
        "logger",
        "default_headers",
        "message_event",
        "on_response",
        "disconnected",
        "keep_alive",
        "waiting_for_100_continue",
        "body",
        "more_body",
        "response_started",
        "response_complete",
        "chunked_encoding",
        "expected_content_length",
        "_head",
        "_hung_up",
    )

    def __init__(
        self,
        scope: Any,
        transport: asyncio.Transport,
        flow: FlowControl,
        logger: logging.Logger,
        default_headers: list[tuple[bytes, bytes]],
        expect_100_continue: bool,
        keep_alive: bool,
        on_response: Callable[[], None],
    ) -> None:
        self.scope = scope
        self.transport = transport
        self.flow = flow
        self.logger = logger
        self.default_headers = default_headers
        self.message_event = asyncio.Event()
        self.on_response = on_response
        self.disconnected = False
        self.keep_alive = keep_alive
        self.waiting_for_100_continue = expect_100_continue
        self.body = bytearray()
        self.more_body = True
        self.response_started = False
        self.response_complete = False
        self.chunked_encoding: bool | None = None
        self.expected_content_length = 0
        self._head: bytes | None = None  # an answer's head, written with its body
        self._hung_up: Callable[[], None] | None = None  # watch_disconnect's

    async def run_asgi(self, app: Any) -> None:
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self._send_500()
            else:
                self.transport.close()
        else:
            if result is not None:
                self.logger.error("ASGI callable should return None, but returned '%s'.", result)
                self.transport.close()
            elif not self.response_started and not self.disconnected:
                self.logger.error("ASGI callable returned without starting response.")
                await self._send_500()
            elif not self.response_complete and not self.disconnected:
                self.logger.error("ASGI callable returned without completing response.")
                self.transport.close()
        finally:
            self.on_response = _nothing

    async def _send_500(self) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(_INTERNAL_ERROR)).encode()),
            (b"connection", b"close"),
        ]
        await self.send({"type": "http.response.start", "status": 500, "headers": headers})
        await self.send({"type": "http.response.body", "body": _INTERNAL_ERROR})

    async def send(self, message: Any) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        if not self.response_started:
            if message["type"] != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{message['type']}'."
                )
            self._start(message["status"], message.get("headers", ()))
        elif not self.response_complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.body', but got '{message['type']}'."
                )
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(
                f"Unexpected ASGI message '{message['type']}' sent, after response already "
                "completed."
            )

    def _start(self, status: int, headers: Any) -> None:
        self.response_started = True
        self.waiting_for_100_continue = False
        parts = [STATUS_LINE[status]]
        for name, value in self.default_headers:
            parts += (name, _SEPARATOR, value, _LINE_END)
        start = len(parts)
        framing: list[tuple[bytes, bytes]] = []
        for name, value in headers:
            name = name.lower()
            if name in _FRAMING:
                framing.append((name, value))
            parts += (name, _SEPARATOR, value, _LINE_END)
        # uvicorn's two checks of each header, made once over all the names and once
        # over all the values: each is one character class, so a concatenation holds
        # a character it refuses exactly when one of its parts does (lowercasing
        # changes letters only, which neither refuses). Which header, only then.
        if _BAD_NAME(b"".join(parts[start::4])) or _BAD_VALUE(b"".join(parts[start + 2 :: 4])):
            _refuse(headers)
        closes = False
        for name, value in framing:
            if name == _CONTENT_LENGTH:
                if self.chunked_encoding is None:
                    self.expected_content_length = int(value.decode())
                    self.chunked_encoding = False
            elif name == _TRANSFER_ENCODING:
                if value.lower() == b"chunked":
                    self.expected_content_length = 0
                    self.chunked_encoding = True
            elif b"close" in [token.strip() for token in value.lower().split(b",")]:
                self.keep_alive = False
                closes = True
        if not self.keep_alive and not closes:
            parts.append(b"connection: close\r\n")
        bodiless = self.scope["method"] == "HEAD" or status in (204, 304)
        if self.chunked_encoding is None and not bodiless:
            self.chunked_encoding = True
            parts.append(b"transfer-encoding: chunked\r\n")
        parts.append(_LINE_END)
        head = b"".join(parts)
        if self.chunked_encoding or bodiless:
            self.transport.write(head)
        else:
            self._head = head

    def _body(self, body: bytes, more_body: bool) -> None:
        head = self._head
        if head is not None:
            self._head = None
        if self.scope["method"] == "HEAD":
            self.expected_content_length = 0
            if head is not None:
                self.transport.write(head)
        elif self.chunked_encoding:
            chunk = [b"%x\r\n" % len(body), body, _LINE_END] if body else []
            if not more_body:
                chunk.append(b"0\r\n\r\n")
            self.transport.write(b"".join(chunk))
        else:
            size = len(body)
            if size > self.expected_content_length:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected_content_length -= size
            if head is not None:
                self.transport.write(head + body)
            elif size:
                self.transport.write(body)
        if not more_body:
            if self.expected_content_length != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.response_complete = True
            self.message_event.set()
            if not self.keep_alive:
                self.transport.close()
            self.on_response()

    def watch_disconnect(self, hung_up: Callable[[], None] | None) -> None:
        """Call ``hung_up`` once if the client disconnects before the answer is complete
        (at once if it has), until called with None: what a ``receive()`` awaited for its
        ``http.disconnect`` tells, without a coroutine, a future or a wake-up at the
        answer's end (gateway/proxy/watch.py). Reading is resumed, as ``receive()``
        does, so that a hang-up is read."""
        if hung_up is not None and self.disconnected:
            hung_up()
            return
        self._hung_up = hung_up
        if hung_up is not None and not self.response_complete:
            self.flow.resume_reading()

    def connection_lost(self) -> None:
        """The server's connection closed (after uvicorn's protocol marked the cycle):
        a watcher of a hang-up is told."""
        hung_up = self._hung_up
        if hung_up is not None and self.disconnected:
            self._hung_up = None
            hung_up()

    async def receive(self) -> dict[str, Any]:
        if self.waiting_for_100_continue and not self.transport.is_closing():
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.waiting_for_100_continue = False
        if not self.disconnected and not self.response_complete:
            self.flow.resume_reading()
            await self.message_event.wait()
            self.message_event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        message = {"type": "http.request", "body": bytes(self.body), "more_body": self.more_body}
        self.body = bytearray()
        return message


def _refuse(headers: Any) -> None:
    """uvicorn's error for the first header its checks refuse (a name before its value;
    called once a header is known to fail, so a value's where no name is)."""
    for name, value in headers:
        if _BAD_NAME(name):
            raise RuntimeError("Invalid HTTP header name.")
        if _BAD_VALUE(value):
            break
    raise RuntimeError("Invalid HTTP header value.")


def _nothing() -> None:
    pass
