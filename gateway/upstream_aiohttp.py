"""UpstreamClient over aiohttp: the fast one.

Same contract as HttpxUpstream (see upstream.py), at a fraction of the CPU per
request: aiohttp parses responses in C and has no request/response model layer.
Idle time-outs are aiohttp's own ``sock_read``, re-armed by the socket as data
arrives, so relaying a stream costs no timer per chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from yarl import URL

from gateway.cutoff import Cutoff
from gateway.errors import (
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.settings import Settings
from gateway.upstream import Headers, UpstreamResponse

# aiohttp would otherwise add a User-Agent, an Accept, an Accept-Encoding and,
# for a bytes body, "Content-Type: application/octet-stream": the engine gets
# only what the proxy forwards (plus Host and Content-Length).
_SKIP_AUTO_HEADERS = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})
_URL_CACHE_SIZE = 64
_DEADLINE = "response time-out"


def _translate(exc: Exception, *, what: str) -> UpstreamError:
    # Unreachable means nothing was sent: the connection was never made.
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return UpstreamUnreachable(f"The engine did not accept a connection in time ({what}).")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamUnreachable(f"The engine is unreachable ({what}).")
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"The engine did not answer in time ({what}).")
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return UpstreamProtocolError(f"The engine closed the connection unexpectedly ({what}).")
    return UpstreamProtocolError(f"The engine connection failed ({what}).")


class _AiohttpResponse:
    def __init__(self, response: aiohttp.ClientResponse, *, deadline: float) -> None:
        self._response = response
        self._deadline = deadline
        self._complete = False
        self.status = response.status
        # aiohttp keeps the engine's header case; the proxy compares lower case.
        # It decodes any content-encoding (as HttpxUpstream does), so that header goes.
        self.headers: Headers = []
        for name, value in response.raw_headers:
            name = name.lower()
            if name != b"content-encoding":
                self.headers.append((name, value))

    async def chunks(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                yield chunk
        except aiohttp.SocketTimeoutError as exc:
            raise UpstreamTimeout("The engine went silent in the middle of the stream.") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise _translate(exc, what="while streaming") from exc
        self._complete = True

    async def read(self, limit: int) -> bytes:
        content = self._response.content
        parts: list[bytes] = []
        size = 0
        cutoff = Cutoff()
        timer = asyncio.get_running_loop().call_at(self._deadline, cutoff.cut, _DEADLINE)
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise UpstreamProtocolError(
                        f"The engine's answer is larger than the gateway's limit ({limit} bytes)."
                    )
                parts.append(chunk)
            await cutoff.settle()
        except asyncio.CancelledError:
            if cutoff.caught() is None:
                raise
            raise UpstreamTimeout("The engine did not finish its answer in time.") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _translate(exc, what="while reading the answer") from exc
        finally:
            timer.cancel()
        self._complete = True
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def aclose(self) -> None:
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
        )

    def _url(self, path: str) -> URL:
        url = self._urls.get(path)
        if url is None:
            url = URL(self._base + path, encoded=True)
            if "?" not in path and len(self._urls) < _URL_CACHE_SIZE:
                self._urls[path] = url
        return url

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes
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
            raise UpstreamTimeout("The engine did not answer in time.") from None
        except aiohttp.ConnectionTimeoutError as exc:
            raise _translate(exc, what=f"{method} {path}") from exc
        except TimeoutError as exc:
            raise UpstreamTimeout("The engine did not answer in time.") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise _translate(exc, what=f"{method} {path}") from exc
        finally:
            timer.cancel()
        return _AiohttpResponse(response, deadline=deadline)

    async def aclose(self) -> None:
        await self._session.close()
