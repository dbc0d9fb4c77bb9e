"""UpstreamClient over httpx: the reference client, and the one tests mock through.

An injected ``httpx.AsyncBaseTransport`` (respx, ``httpx.MockTransport``) always
selects it (see factory.py), so unit tests of the proxy need no server.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import httpx

from gateway._types import Headers
from gateway.errors import UpstreamTimeout
from gateway.settings import Settings
from gateway.upstream.base import (
    LATE,
    NO_ANSWER,
    SILENT,
    ErrorTable,
    UpstreamResponse,
    closed,
    connect_timed_out,
    read_limited,
    timed_out,
    translate,
    unreachable,
)

_ERRORS: ErrorTable = (
    (httpx.ConnectTimeout, connect_timed_out),
    (httpx.ConnectError, unreachable),
    ((httpx.TimeoutException, TimeoutError), timed_out),
    (httpx.RemoteProtocolError, closed),
)


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
            raise UpstreamTimeout(SILENT) from exc
        except httpx.HTTPError as exc:
            raise translate(exc, _ERRORS, what="while streaming") from exc

    async def read(self, limit: int) -> bytes:
        try:
            async with asyncio.timeout_at(self._deadline):
                chunks = self._response.aiter_bytes()  # never yields b""
                return await read_limited(functools.partial(anext, chunks, b""), limit)
        except TimeoutError as exc:
            raise UpstreamTimeout(LATE) from exc
        except httpx.HTTPError as exc:
            raise translate(exc, _ERRORS, what="while reading the answer") from exc

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
            raise UpstreamTimeout(NO_ANSWER) from exc
        except httpx.HTTPError as exc:
            raise translate(exc, _ERRORS, what=f"{method} {path}") from exc
        return _HttpxResponse(response, deadline=deadline)

    async def aclose(self) -> None:
        await self._client.aclose()
