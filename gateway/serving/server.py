"""Running the app under uvicorn with the limits a front door needs.

uvicorn's httptools protocol (the one it picks when httptools is installed,
as here) has no cap on the size of a request head and no deadline for it:
a client can send headers forever, or one byte a minute (slow-loris), and
hold memory and a connection. ``guarded_protocol`` adds both. On SIGTERM the
app's Drain turns /readyz and new requests to 503 and gives in-flight requests
``server.drain_timeout`` seconds before it ends them (see gateway/drain.py);
the port stays open until none is left (``DrainingServer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import socket
import urllib.parse
from collections.abc import Callable
from typing import Any, cast

import httptools
import uvicorn
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.drain import Drain
from gateway.observe.logs import setup_logging
from gateway.serving.cycle import Cycle
from gateway.settings import Settings


def _plain_response(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(text)).encode() + b"\r\nconnection: close\r\n\r\n" + text
    )


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head that is over the cap."""


class _LingeringTransport:
    """The connection's transport as uvicorn sees it, with one change: closing it
    while the client is still sending its request body becomes a lingering close.

    A client that sends its whole body before it reads (Python's urllib and
    requests do, with ``Connection: close``) and is answered early, say with a
    413, would otherwise get a reset: closing a socket with unread input makes
    the kernel send RST, which destroys the answer before the client reads it.
    """

    __slots__ = (
        "_transport",
        "_protocol",
        "write",
        "is_closing",
        "pause_reading",
        "resume_reading",
    )

    def __init__(self, transport: asyncio.Transport, protocol: _GuardedHttpToolsProtocol) -> None:
        self._transport = transport
        self._protocol: _GuardedHttpToolsProtocol | None = protocol
        # Bound once: uvicorn calls these for every request.
        self.write = transport.write
        self.is_closing = transport.is_closing
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading

    def close(self) -> None:
        protocol = self._protocol
        if protocol is not None and protocol.body_pending and not protocol.lingering:
            protocol.linger_then_close()
        else:
            self._transport.close()

    def release(self) -> None:
        """Break the protocol <-> transport reference cycle once the connection is gone,
        so both are freed at once rather than by the cycle collector."""
        self._protocol = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with a cap on request-head bytes (431) and a deadline for a
    request head, counted from a new connection or a request's first byte (408)."""

    max_head_bytes = 64 * 1024
    head_timeout = 10.0
    linger = 2.0
    # After an early answer to a request whose body is still arriving: read and
    # drop at most this much of it, for at most this long, then close.
    body_linger = 5.0
    body_linger_bytes = 64 * 1024 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = False
        self._head_begun = False
        self._head_bytes = 0
        self._parsed_bytes = 0
        self._head_too_large = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_since: float | None = None
        self._idle_since: float | None = None
        self.lingering = False
        self.body_pending = False
        self._lingered = 0
        self._raw: asyncio.Transport | None = None
        self._last_request = False
        self._asgi = {"version": self.asgi_version, "spec_version": "2.3"}

    # The two deadlines (a request's head; an idle keep-alive connection) are noted
    # as a time per request and checked by a timer the connection keeps, armed
    # again for what is left when it fires early: scheduling and cancelling a
    # timer for each of them on every request cost 3% of a small request's
    # instructions. A closed connection cancels its timers.

    def _arm(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._head_since = self.loop.time()
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_due)

    def _disarm(self) -> None:
        self._in_head = False
        self._head_begun = False
        self._head_since = None

    def _head_due(self) -> None:
        self._head_timer = None
        since = self._head_since
        if since is None:
            return  # no head awaited now; the next one arms the timer again
        left = since + self.head_timeout - self.loop.time()
        if left > 0:
            self._head_timer = self.loop.call_later(left, self._head_due)
            return
        self._head_timed_out()

    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = None  # (uvicorn's name: data came, or an answer ended)

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._idle_since = None
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self._idle_due
            )

    def _idle_due(self) -> None:
        self.timeout_keep_alive_task = None
        since = self._idle_since
        if since is None:
            return  # a request came; the end of its answer arms the timer again
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._idle_due)
            return
        self.timeout_keep_alive_handler()

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self.timeout_keep_alive_task):
            if timer is not None:
                timer.cancel()
        self._head_timer = self.timeout_keep_alive_task = None
        self._head_since = self._idle_since = None

    def _head_timed_out(self) -> None:
        if self.transport.is_closing():
            return
        if not self._head_begun:
            self.transport.close()
            return
        self._refuse(
            _plain_response(b"408 Request Timeout", b"Request headers not received in time.")
        )

    def _refuse(self, response: bytes) -> None:
        # Send the answer, then read and drop what the client still sends for a
        # moment before closing: closing with unread input makes the kernel send
        # a reset, which can destroy the answer before the client reads it
        # (nginx's "lingering close").
        self._disarm()
        self.lingering = True
        self.transport.write(response)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(self.linger, self.transport.close)

    def linger_then_close(self) -> None:
        """Close once the client has stopped sending, or after ``body_linger`` (the
        answer is already written; what still arrives is dropped)."""
        assert self._raw is not None  # set in connection_made
        self.lingering = True
        if self._raw.can_write_eof():
            self._raw.write_eof()
        self.loop.call_later(self.body_linger, self._raw.close)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._raw = transport
        super().connection_made(_LingeringTransport(transport, self))  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        if self.cycle is not None:
            cast(Cycle, self.cycle).connection_lost()
        self._cancel_timers()
        if isinstance(self.transport, _LingeringTransport):
            self.transport.release()
        self._raw = None

    # The parser's callbacks, one Python call each (uvicorn's own, with the head's
    # count, made two or three): they run for every header of every request.
    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        scope: Any = {
            "type": "http",
            "asgi": self._asgi,
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }
        self.scope = scope
        self._arm()
        self._head_begun = True
        self._parsed_bytes = 0

    def _too_large(self) -> None:
        self._head_too_large = True
        raise _HeadTooLarge  # the parser stops; uvicorn calls send_400_response

    def on_url(self, url: bytes) -> None:
        self._parsed_bytes += len(url)
        if self._parsed_bytes > self.max_head_bytes:
            self._too_large()
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_bytes += len(name) + len(value) + 4
        if self._parsed_bytes > self.max_head_bytes:
            self._too_large()
        name = name.lower()
        # llhttp keeps a value's trailing whitespace, which is not part of it (RFC 9110 5.5).
        value = value.rstrip(b" \t")
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._disarm()
        self.body_pending = True
        parser = self.parser
        if parser.should_upgrade():
            super().on_headers_complete()  # uvicorn's own way with an upgrade
            if self._last_request and self.cycle is not None:
                self.cycle.keep_alive = False
            return
        scope: Any = self.scope
        scope["method"] = parser.get_method().decode("ascii")
        version = parser.get_http_version()
        if version != "1.1":
            scope["http_version"] = version
        url = httptools.parse_url(self.url)
        raw_path = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root = self.root_path
        scope["path"] = root + path
        scope["raw_path"] = root.encode("ascii") + raw_path if root else raw_path
        scope["query_string"] = url.query or b""
        app = self.app
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        previous = self.cycle
        cycle = Cycle(
            scope,
            self.transport,
            self.flow,
            self.logger,
            self.server_state.default_headers,
            self.expect_100_continue,
            version != "1.0" and parser.should_keep_alive() and not self._last_request,
            self.on_response_complete,
        )
        self.cycle = cycle  # type: ignore[assignment]
        if previous is None or previous.response_complete:
            self._start_asgi_task(cycle, app)  # type: ignore[arg-type]
        else:
            # A pipelined request: it starts once the one before is answered.
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, app))  # type: ignore[arg-type]

    def shutdown(self) -> None:
        # The server is stopping. A connection it accepted whose request has not
        # been read yet (a new one, or one in the middle of a request head) gets
        # that request answered (the drain's 503), then closes: closed unanswered,
        # the client could not tell it from a crash. The head deadline bounds the
        # wait; an idle keep-alive connection is closed at once, as uvicorn does.
        if not self.transport.is_closing() and (self.cycle is None or self._head_begun):
            self._last_request = True
            return
        super().shutdown()

    def on_message_complete(self) -> None:
        self.body_pending = False
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self._lingered += len(data)
            if self._lingered > self.body_linger_bytes and self._raw is not None:
                self._raw.close()
            return
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        # The callbacks count whole heads; but the parser keeps an unfinished
        # header whole (a value can be any length) before any callback, so also
        # count the bytes fed while a head is open: at most one read past the
        # cap is ever held.
        self._head_bytes += len(data)
        if self._head_bytes > self.max_head_bytes:
            self._head_too_large = True
            self.send_400_response("")

    def send_400_response(self, msg: str) -> None:
        if self._head_too_large:
            self._refuse(
                _plain_response(
                    b"431 Request Header Fields Too Large",
                    b"Request headers are larger than this server's limit.",
                )
            )
            return
        super().send_400_response(msg)


def guarded_protocol(*, max_head_bytes: int, head_timeout: float) -> type[asyncio.Protocol]:
    """The httptools protocol class with these limits."""
    return type(
        "GuardedHttpToolsProtocol",
        (_GuardedHttpToolsProtocol,),
        {"max_head_bytes": max_head_bytes, "head_timeout": head_timeout},
    )


class DrainingServer(uvicorn.Server):
    """A uvicorn server that drains on SIGTERM/SIGINT before it stops.

    The first signal starts the app's drain and keeps the port open while
    requests are in flight: /readyz answers 503 "draining" and a new request
    503 ``shutting_down``, rather than a refused connection that a probe or a
    client could not tell from a crash. Once none is in flight (the drain ends
    the last ones at ``drain_timeout``), uvicorn stops as usual. A second
    signal stops accepting at once (the drain still runs its course)."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        drain: Drain,
        drain_timeout: float,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._drain = drain
        self._drain_timeout = drain_timeout
        self._on_started = on_started
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        self._exit_task: asyncio.Task[None] | None = None

    async def startup(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        # What start-up made (the app, its policy and routes, the imported modules:
        # most of the heap) is kept for the process's life: collected once, then
        # moved out of the collector's reach, so that no full collection walks it
        # again (one took 25 ms of a 4 s run at c=32, every request waiting on it).
        # A reload's replaced config is freed as usual, its cycles too; the first
        # config's cycles, frozen with it, stay.
        gc.collect()
        gc.freeze()
        if self._on_started is not None and not self.should_exit:
            self._on_started()

    def handle_exit(self, sig: int, frame: Any) -> None:
        loop = self._loop
        if loop is None or not self.started or self._signalled:
            super().handle_exit(sig, frame)  # before serving, or a second signal
            if loop is not None:
                loop.call_soon_threadsafe(self._drain.begin, self._drain_timeout)
            return
        self._signalled = True
        loop.call_soon_threadsafe(self._begin_drain)

    def _begin_drain(self) -> None:
        self._drain.begin(self._drain_timeout)
        self._exit_task = asyncio.ensure_future(self._exit_when_drained())

    async def _exit_when_drained(self) -> None:
        # Bounded too: the drain cancels what is left at drain_timeout, and
        # that must not depend on every request unregistering at once.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drain.finished(), self._drain_timeout + 1)
        self.should_exit = True


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.Config keyword arguments for the server limits in ``settings``."""
    server = settings.server
    return {
        "http": guarded_protocol(
            max_head_bytes=server.max_header_bytes, head_timeout=server.header_timeout
        ),
        "h11_max_incomplete_event_size": server.max_header_bytes,
        "timeout_keep_alive": server.keep_alive_timeout,
        "limit_concurrency": server.limit_concurrency,
        # A backstop only: the Drain ends in-flight requests itself at drain_timeout.
        "timeout_graceful_shutdown": math.ceil(server.drain_timeout) + 5,
        "access_log": False,
        "server_header": False,
        # uvicorn's default rewrites scope["client"] from X-Forwarded-For sent by
        # 127.0.0.1 (a middleware around every request); nothing here reads the
        # client's address, and claimed addresses are dropped (docs/headers.md).
        "proxy_headers": False,
    }


def run_server(
    app: Any,
    settings: Settings,
    *,
    log_level: str,
    sockets: list[socket.socket] | None = None,
    on_started: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` until SIGTERM/SIGINT, then drain. ``sockets``: listen on these
    instead of binding ``settings.listen``; ``on_started``: called once serving."""
    drain: Drain = app.state.gateway.drain
    setup_logging(settings.log.format, log_level)
    config = uvicorn.Config(
        app,
        host=settings.listen.host,
        port=settings.listen.port,
        log_level=log_level,
        log_config=None,  # setup_logging's, for uvicorn's loggers and all the others
        **uvicorn_options(settings),
    )
    server = DrainingServer(
        config, drain=drain, drain_timeout=settings.server.drain_timeout, on_started=on_started
    )
    server.run(sockets=sockets)
