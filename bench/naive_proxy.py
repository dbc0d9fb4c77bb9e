"""The baseline: the obvious Starlette + httpx pass-through, as most small proxies write it.

``NAIVE_UPSTREAM=http://127.0.0.1:9000 uvicorn --factory bench.naive_proxy:create_app``

One shared ``httpx.AsyncClient`` (default pool limits; no timeout, since LLM
answers are slow), the request body read whole and forwarded with the client's
headers, and streamed answers relayed with ``StreamingResponse``. Nothing here
is tuned: that is the point of a baseline.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_HOP_BY_HOP = {"host", "connection", "content-length", "transfer-encoding", "keep-alive"}


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    upstream = os.environ.get("NAIVE_UPSTREAM", "http://127.0.0.1:9000")
    async with httpx.AsyncClient(base_url=upstream, timeout=None) as client:
        app.state.client = client
        yield


async def proxy(request: Request) -> Response:
    """Forward the request upstream and relay the answer, streaming it chunk by chunk."""
    client: httpx.AsyncClient = request.app.state.client
    headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
    upstream_request = client.build_request(
        request.method, request.url.path, headers=headers, content=await request.body()
    )
    upstream = await client.send(upstream_request, stream=True)
    answer_headers = {k: v for k, v in upstream.headers.items() if k not in _HOP_BY_HOP}
    return StreamingResponse(
        upstream.aiter_raw(),
        status_code=upstream.status_code,
        headers=answer_headers,
        background=BackgroundTask(upstream.aclose),
    )


def create_app() -> Starlette:
    """The proxy app; its lifespan opens and closes the one shared client."""
    return Starlette(
        routes=[Route("/v1/{path:path}", proxy, methods=["GET", "POST"])], lifespan=_lifespan
    )
