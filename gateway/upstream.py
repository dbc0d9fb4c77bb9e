"""The gateway's view of the engine: a small interface and its implementations.

``UpstreamClient.request()`` sends one request and returns an UpstreamResponse
(status, headers, the body as an async iterator of raw bytes, ``aclose``). The
implementation enforces the configured time-outs and turns its library's
exceptions into the gateway's UpstreamError family here, at this one boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

import httpx

from gateway.errors import (
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.settings import Settings

Headers = list[tuple[bytes, bytes]]


class UpstreamResponse(Protocol):
    """An engine response whose body has not been read yet."""

    status: int
    headers: Headers  # names in lower case

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw body bytes as they arrive; UpstreamTimeout after ``stream_idle`` of silence."""
        ...

    async def read(self, limit: int) -> bytes:
        """The whole body (within the response time-out); UpstreamProtocolError past ``limit``."""
        ...

    async def aclose(self) -> None:
        """Release the connection; closes it if the body was not read to the end."""
        ...


class UpstreamClient(Protocol):
    """Sends requests to the engine."""

    async def request(
        self, method: str, path: str, *, headers: Headers, body: bytes
    ) -> UpstreamResponse:
        """Send a request and wait for the response headers. UpstreamUnreachable
        only when no connection could be made (nothing was sent): the balancer
        retries on another replica then, and only then."""
        ...

    async def aclose(self) -> None:
        """Close every pooled connection."""
        ...


def _translate(exc: Exception, *, what: str) -> UpstreamError:
    if isinstance(exc, httpx.ConnectTimeout):
        return UpstreamUnreachable(f"The engine did not accept a connection in time ({what}).")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamUnreachable(f"The engine is unreachable ({what}).")
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return UpstreamTimeout(f"The engine did not answer in time ({what}).")
    if isinstance(exc, httpx.RemoteProtocolError):
        return UpstreamProtocolError(f"The engine closed the connection unexpectedly ({what}).")
    return UpstreamProtocolError(f"The engine connection failed ({what}).")


class _HttpxResponse:
    def __init__(self, response: httpx.Response, *, deadline: float) -> None:
        self._response = response
        self._deadline = deadline
        self.status = response.status_code
        # httpx decodes any content-encoding in aiter_bytes, so the header goes.
        self.headers: Headers = []
        for name, value in response.headers.raw:
            name = name.lower()
            if name != b"content-encoding":
                self.headers.append((name, value))

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.ReadTimeout as exc:
            raise UpstreamTimeout("The engine went silent in the middle of the stream.") from exc
        except httpx.HTTPError as exc:
            raise _translate(exc, what="while streaming") from exc

    async def read(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout_at(self._deadline):
                async for chunk in self._response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise UpstreamProtocolError(
                            "The engine's answer is larger than the gateway's limit "
                            f"({limit} bytes)."
                        )
                    parts.append(chunk)
        except TimeoutError as exc:
            raise UpstreamTimeout("The engine did not finish its answer in time.") from exc
        except httpx.HTTPError as exc:
            raise _translate(exc, what="while reading the answer") from exc
        return b"".join(parts)

    async def aclose(self) -> None:
        await self._response.aclose()


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
        self, method: str, path: str, *, headers: Headers, body: bytes
    ) -> UpstreamResponse:
        deadline = asyncio.get_running_loop().time() + self._response_timeout
        request = self._client.build_request(method, path, headers=headers, content=body)
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
        except TimeoutError as exc:
            raise UpstreamTimeout("The engine did not answer in time.") from exc
        except httpx.HTTPError as exc:
            raise _translate(exc, what=f"{method} {path}") from exc
        return _HttpxResponse(response, deadline=deadline)

    async def aclose(self) -> None:
        await self._client.aclose()


def make_upstream(
    settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
) -> UpstreamClient:
    """The UpstreamClient that ``settings.upstream.client`` names (an injected
    ``transport`` always means the httpx client: tests mock through it); with
    several replicas, a Balancer over one such client per replica."""
    if len(settings.upstream.replicas) > 1:
        from gateway.balancer import Balancer

        return Balancer.from_settings(settings, lambda one: make_upstream(one, transport=transport))
    if transport is None and settings.upstream.client == "httptools":
        from gateway.upstream_httptools import HttptoolsUpstream

        return HttptoolsUpstream(settings)
    if transport is None and settings.upstream.client == "aiohttp":
        from gateway.upstream_aiohttp import AiohttpUpstream

        return AiohttpUpstream(settings)
    return HttpxUpstream(settings, transport=transport)
