"""UpstreamClient over httpx: the reference client, and the one tests mock through.

An injected ``httpx.AsyncBaseTransport`` (respx, ``httpx.MockTransport``) always
selects it (see factory.py), so unit tests of the proxy need no server.

The body is read raw and undone by the gateway's own bounded decoder (decoder.py):
httpx inflates a whole read in one call. httpcore skips interim (1xx) heads and bounds
a head at 100 KiB; the limits of the settings are held here too. It keeps bytes that
came after an answer and would parse them as the next request's answer, so a
connection that holds any is closed instead of kept (``_refuse_surplus``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import h11
import httpx

from gateway._types import Headers
from gateway.errors import UpstreamTimeout
from gateway.routing.hint import NO_HINT, Hint
from gateway.settings import Limits, Settings
from gateway.upstream.base import (
    LATE,
    NO_ANSWER,
    SILENT,
    ErrorTable,
    UpstreamResponse,
    check_head_size,
    closed,
    connect_timed_out,
    head_too_large,
    read_limited,
    timed_out,
    translate,
    unreachable,
)
from gateway.upstream.decoder import decoding

_ERRORS: ErrorTable = (
    (httpx.ConnectTimeout, connect_timed_out),
    (httpx.ConnectError, unreachable),
    ((httpx.TimeoutException, TimeoutError), timed_out),
    (httpx.RemoteProtocolError, closed),
)


class _HttpxResponse:
    def __init__(self, response: httpx.Response, *, deadline: float, limits: Limits) -> None:
        self._response = response
        self._deadline = deadline
        self.status = response.status_code
        headers = [(name.lower(), value) for name, value in response.headers.raw]
        check_head_size(headers, limits.max_response_header_bytes, limits.max_response_headers)
        self.headers, self._decoder = decoding(headers)
        self._body: AsyncGenerator[bytes] | None = None

    async def _stream(self, what: str, idle: str | None) -> AsyncGenerator[bytes]:
        """The body, raw bytes undone by the decoder; UpstreamError on failure
        (``UpstreamTimeout(idle)`` for silence past ``stream_idle``, if given)."""
        response = self._response
        if response.is_stream_consumed:
            # An answer made in memory (a mock transport's): httpx read and decoded it.
            if response.content:
                yield response.content
            return
        decoder = self._decoder
        try:
            async for data in response.stream:  # type: ignore[union-attr]
                if decoder is None:
                    yield data
                    continue
                for piece in decoder.pieces(data):
                    yield piece
        except httpx.ReadTimeout as exc:
            if idle is None:
                raise translate(exc, _ERRORS, what=what) from exc
            raise UpstreamTimeout(idle) from exc
        except httpx.HTTPError as exc:
            raise translate(exc, _ERRORS, what=what) from exc
        _refuse_surplus(response)  # (before httpcore can keep the connection)
        if decoder is not None and (tail := decoder.flush()):
            yield tail

    def _pieces(self, what: str, idle: str | None = None) -> AsyncGenerator[bytes]:
        self._body = body = self._stream(what, idle)  # (closed by aclose)
        return body

    def chunks(self) -> AsyncIterator[bytes]:
        return self._pieces("while streaming", SILENT)

    async def read(self, limit: int) -> bytes:
        try:
            async with asyncio.timeout_at(self._deadline):
                pieces = self._pieces("while reading the answer")  # never yields b""
                return await read_limited(functools.partial(anext, pieces, b""), limit)
        except TimeoutError as exc:
            raise UpstreamTimeout(LATE) from exc

    def finish(self) -> None:
        pass  # a body not read to its end closes the connection (httpcore's rule)

    async def aclose(self) -> None:
        if self._body is not None:
            await self._body.aclose()  # (left before its end: closed here, not by the loop)
        await self._response.aclose()


def _refuse_surplus(response: httpx.Response) -> None:
    """After a whole answer: if more bytes came behind it, mark its connection failed, so
    that httpcore closes it instead of parsing them as the next request's answer. No
    public API shows them: the HTTP/1.1 connection's h11 state, under the streams that
    wrap it (httpx's, the pool's), is read here; nothing is done where it is not there."""
    stream: Any = response.stream
    for _ in range(6):
        connection = getattr(stream, "_connection", None)
        if connection is not None:
            state = getattr(connection, "_h11_state", None)
            if isinstance(state, h11.Connection) and state.trailing_data[0]:
                state.send_failed()  # (h11's own: its state is then ERROR; httpcore closes)
            return
        stream = getattr(stream, "_stream", None) or getattr(stream, "_httpcore_stream", None)


class HttpxUpstream:
    """UpstreamClient over one shared ``httpx.AsyncClient`` (tests inject a transport)."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        t = settings.timeouts
        self._response_timeout = t.response
        self._limits = limits = settings.limits
        self._head_too_large = head_too_large(
            limits.max_response_header_bytes, limits.max_response_headers
        )
        self._client = httpx.AsyncClient(
            base_url=settings.upstream.url,
            transport=transport,
            timeout=httpx.Timeout(
                connect=t.connect, read=t.stream_idle, write=t.response, pool=t.response
            ),
            limits=httpx.Limits(
                max_connections=settings.upstream.max_connections,
                max_keepalive_connections=settings.upstream.max_connections,
            ),
            follow_redirects=False,
            trust_env=False,
        )

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        deadline = asyncio.get_running_loop().time() + self._response_timeout
        request = self._client.build_request(method, path, headers=headers, content=body)
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
        except TimeoutError as exc:
            raise UpstreamTimeout(NO_ANSWER) from exc
        except httpx.RemoteProtocolError as exc:
            if _head_too_long(exc):
                raise self._head_too_large from exc
            raise translate(exc, _ERRORS, what=f"{method} {path}") from exc
        except httpx.HTTPError as exc:
            raise translate(exc, _ERRORS, what=f"{method} {path}") from exc
        try:
            return _HttpxResponse(response, deadline=deadline, limits=self._limits)
        except BaseException:
            await response.aclose()
            raise

    async def aclose(self) -> None:
        await self._client.aclose()


def _head_too_long(exc: BaseException) -> bool:
    """Whether h11 refused a head past its own bound (its 431 hint says so)."""
    while exc is not None:
        if isinstance(exc, h11.RemoteProtocolError) and exc.error_status_hint == 431:
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False
