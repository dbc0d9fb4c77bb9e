"""A compressed engine answer is inflated a bounded piece at a time: one small body that
inflates to far more than ``limits.max_response_bytes`` (a "zip bomb") is refused past the
limit with the gateway's memory bounded by the limit, never by what the body inflates to.

Over every upstream client (the UpstreamClient itself, as the proxy reads it), against the
raw-socket engine of tests/support; memory is Python's own accounting (tracemalloc's
peak while the answer is read), not the process's.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.settings import load_settings
from gateway.upstream.base import UpstreamClient
from gateway.upstream.factory import make_upstream
from tests.support.engine import FakeEngine
from tests.support.rawengine import gzip_bomb, sends_gzip

pytestmark = pytest.mark.anyio
INFLATED = 256 << 20  # what the body inflates to
LIMIT = 1 << 20  # limits.max_response_bytes
BOUND = 8 << 20  # the most the gateway may hold while it reads


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_bomb(INFLATED)  # about 256 KB


@pytest.fixture
async def opened() -> AsyncIterator[list[UpstreamClient]]:
    """The clients a test opens (``open_client``), closed after it."""
    clients: list[UpstreamClient] = []
    yield clients
    for client in clients:
        await client.aclose()


def open_client(opened: list[UpstreamClient], client: str, url: str) -> UpstreamClient:
    """The ``client`` UpstreamClient to ``url``, with a 1 MiB answer limit."""
    settings = load_settings(
        None,
        overrides={
            ("upstream", "url"): url,
            ("upstream", "client"): client,
            ("limits", "max_response_bytes"): LIMIT,
        },
        environ={},
    )
    opened.append(make_upstream(settings))
    return opened[-1]


async def test_a_whole_answer_inflated_past_the_limit_is_refused_in_bounded_memory(
    upstream_client: str, opened: list[UpstreamClient], bomb: bytes
) -> None:
    async with FakeEngine(sends_gzip(bomb)) as engine:
        client = open_client(opened, upstream_client, engine.url)
        response = await client.request("POST", "/v1/x", headers=[], body=b"{}")
        tracemalloc.start()
        try:
            with pytest.raises(UpstreamProtocolError, match="larger than the gateway's limit"):
                await response.read(LIMIT)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await response.aclose()
    assert peak < BOUND, peak


async def test_a_compressed_stream_comes_in_bounded_pieces(
    upstream_client: str, opened: list[UpstreamClient], bomb: bytes
) -> None:
    async with FakeEngine(sends_gzip(bomb, stream=True)) as engine:
        client = open_client(opened, upstream_client, engine.url)
        response = await client.request("POST", "/v1/x", headers=[], body=b"{}")
        largest = total = 0
        tracemalloc.start()
        try:
            async for piece in response.chunks():
                largest, total = max(largest, len(piece)), total + len(piece)
                if total > 4 * LIMIT:  # the relay would stop at limits.max_stream_bytes
                    break
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await response.aclose()
    assert total > 4 * LIMIT
    assert largest <= LIMIT and peak < BOUND, (largest, peak)
