"""UpstreamClient over aiohttp: the fast one.

Same contract as every UpstreamClient (see base.py), at a fraction of the CPU per
request: aiohttp parses responses in C and has no request/response model layer.
Idle time-outs are aiohttp's own ``sock_read``, re-armed by the socket as data
arrives, so relaying a stream costs no timer per chunk. aiohttp reads past interim
(1xx) heads, bounds each head line and the count of them (set from the settings; the
head's bytes are held to them here), inflates a compressed body a bounded piece at a
time, and parses each answer with a new parser, so bytes after an answer are never
taken for the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import aiohttp
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from yarl import URL

from gateway._types import Headers
from gateway.cutoff import Cutoff
from gateway.errors import UpstreamError, UpstreamTimeout
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

# aiohttp would otherwise add a User-Agent, an Accept, an Accept-Encoding and,
# for a bytes body, "Content-Type: application/octet-stream": the engine gets
# only what the proxy forwards (plus Host and Content-Length).
_SKIP_AUTO_HEADERS = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})
_URL_CACHE_SIZE = 64
_DEADLINE = "response time-out"


# Unreachable means nothing was sent: the connection was never made.
_ERRORS: ErrorTable = (
    (aiohttp.ConnectionTimeoutError, connect_timed_out),
    (aiohttp.ClientConnectorError, unreachable),
    (TimeoutError, timed_out),
    ((aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError), closed),
)


class _AiohttpResponse:
    def __init__(
        self, response: aiohttp.ClientResponse, *, deadline: float, limits: Limits
    ) -> None:
        self._response = response
        self._deadline = deadline
        self._complete = False
        self._chunks: AsyncGenerator[bytes] | None = None
        self.status = response.status
        # aiohttp keeps the engine's header case; the proxy compares lower case.
        # It decodes any content-encoding (as HttpxUpstream does), so that header goes.
        self.headers: Headers = []
        raw = response.raw_headers
        check_head_size(raw, limits.max_response_header_bytes, limits.max_response_headers)
        for name, value in raw:
            name = name.lower()
            if name != b"content-encoding":
                self.headers.append((name, value))

    async def _body(self) -> AsyncGenerator[bytes]:
        content = self._response.content
        try:
            while chunk := await content.readany():
                yield chunk
        except aiohttp.SocketTimeoutError as exc:
            raise UpstreamTimeout(SILENT) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise translate(exc, _ERRORS, what="while streaming") from exc
        self._complete = True

    def chunks(self) -> AsyncIterator[bytes]:
        self._chunks = chunks = self._body()
        return chunks

    async def read(self, limit: int) -> bytes:
        cutoff = Cutoff()
        timer = asyncio.get_running_loop().call_at(self._deadline, cutoff.cut, _DEADLINE)
        try:
            data = await read_limited(self._response.content.readany, limit)
            self._complete = True
            await cutoff.settle()
        except asyncio.CancelledError:
            if cutoff.caught() is None:
                raise
            raise UpstreamTimeout(LATE) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise translate(exc, _ERRORS, what="while reading the answer") from exc
        finally:
            timer.cancel()
        return data

    def finish(self) -> None:
        # The body's end already came (its last chunk read with the end event): the
        # connection may be kept; else it is closed, as any body not read to its end.
        if self._response.content.at_eof():
            self._complete = True

    async def aclose(self) -> None:
        if self._chunks is not None:
            await self._chunks.aclose()  # (left before its end: closed here, not by the loop)
        if self._complete:
            self._response.release()
        else:
            # A half-read body leaves the connection mid-message: it cannot be reused,
            # and closing it tells the engine to stop generating.
            self._response.close()


class AiohttpUpstream:
    """UpstreamClient over one shared ``aiohttp.ClientSession`` (create it in the running loop)."""

    def __init__(self, settings: Settings) -> None:
        t = settings.timeouts
        self._limits = limits = settings.limits
        self._head_too_large = head_too_large(
            limits.max_response_header_bytes, limits.max_response_headers
        )
        self._base = settings.upstream.url.rstrip("/")
        self._response_timeout = t.response
        self._urls: dict[str, URL] = {}
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=settings.upstream.max_connections,
                limit_per_host=0,
                ttl_dns_cache=None,
            ),
            # total/connect stay off: a stream may last longer than any fixed bound.
            # The wait for headers and for a whole answer is bounded by the deadline.
            timeout=aiohttp.ClientTimeout(
                total=None, connect=None, sock_connect=t.connect, sock_read=t.stream_idle
            ),
            auto_decompress=True,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            trust_env=False,
            # Bounds on what aiohttp's parser holds; the head's bytes are checked after.
            max_line_size=limits.max_response_header_bytes,
            max_field_size=limits.max_response_header_bytes,
            max_headers=limits.max_response_headers,
        )

    def _url(self, path: str) -> URL:
        url = self._urls.get(path)
        if url is None:
            url = URL(self._base + path, encoded=True)
            if "?" not in path and len(self._urls) < _URL_CACHE_SIZE:
                self._urls[path] = url
        return url

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes, hint: Hint = NO_HINT
    ) -> UpstreamResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._response_timeout
        str_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        # A timer and a Cutoff rather than asyncio.timeout: the same effect at a
        # fraction of the cost, and this runs for every request.
        cutoff = Cutoff()
        timer = loop.call_at(deadline, cutoff.cut, _DEADLINE)
        try:
            response = await self._session.request(
                method,
                self._url(path),
                headers=str_headers,
                data=body if body or method != "GET" else None,
                allow_redirects=False,
                compress=None,
            )
            await cutoff.settle()
        except asyncio.CancelledError:
            if cutoff.caught() is None:
                raise
            raise UpstreamTimeout(NO_ANSWER) from None
        except aiohttp.ConnectionTimeoutError as exc:
            raise translate(exc, _ERRORS, what=f"{method} {path}") from exc
        except TimeoutError as exc:
            raise UpstreamTimeout(NO_ANSWER) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise self._failure(exc, f"{method} {path}") from exc
        finally:
            timer.cancel()
        try:
            return _AiohttpResponse(response, deadline=deadline, limits=self._limits)
        except BaseException:
            response.close()
            raise

    def _failure(self, exc: BaseException, what: str) -> UpstreamError:
        """The UpstreamError of a failed request: a head past aiohttp's bounds (its
        parser's error, as the cause) is one past the gateway's limits."""
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, LineTooLong) or (
                isinstance(cause, BadHttpMessage) and "Too many headers" in str(cause)
            ):
                return self._head_too_large
            cause = cause.__cause__ or cause.__context__
        return translate(exc, _ERRORS, what=what)

    async def aclose(self) -> None:
        await self._session.close()
