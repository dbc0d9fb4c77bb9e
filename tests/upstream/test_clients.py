"""The UpstreamClient contract, over each implementation, against a real loopback engine."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from typing import cast

import httpx
import pytest

from gateway.errors import UpstreamProtocolError, UpstreamTimeout, UpstreamUnreachable
from gateway.settings import Settings, load_settings
from gateway.upstream.aiohttp_impl import AiohttpUpstream
from gateway.upstream.base import UpstreamClient
from gateway.upstream.factory import make_upstream
from gateway.upstream.httptools_impl import HttptoolsUpstream
from gateway.upstream.httpx_impl import HttpxUpstream
from tests.support.bodies import DONE
from tests.support.engine import (
    JSON,
    LAST_CHUNK,
    FakeEngine,
    Handler,
    Seen,
    Wire,
    chunk,
    http_response,
    sends,
    sends_when,
    stalls_after,
    stream_end,
    stream_start,
)
from tests.support.faults import refused_url, unanswered_url
from tests.support.polling import until

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    """Both event loops: ``ft-gateway serve`` runs on uvloop, whose transports differ."""
    return "asyncio", {"use_uvloop": request.param == "uvloop"}


def make_settings(client: str, url: str, **timeouts: float) -> Settings:
    environ = {f"FT_GATEWAY_TIMEOUTS__{k.upper()}": str(v) for k, v in timeouts.items()}
    return load_settings(
        None,
        overrides={("upstream", "url"): url, ("upstream", "client"): client},
        environ=environ,
    )


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., UpstreamClient]]:
    """Opens clients (``connect(name, url, **timeouts)``) and closes them after the test."""
    opened: list[UpstreamClient] = []

    def open_client(client: str, url: str, **timeouts: float) -> UpstreamClient:
        upstream = make_upstream(make_settings(client, url, **timeouts))
        opened.append(upstream)
        return upstream

    yield open_client
    for upstream in opened:
        await upstream.aclose()


async def fetch(
    upstream: UpstreamClient, method: str = "POST", path: str = "/v1/x", *, body: bytes = b"{}"
) -> tuple[int, bytes]:
    """One whole exchange: request, read the answer (at most 1 KiB), close; its status and
    body."""
    response = await upstream.request(method, path, headers=[], body=body)
    try:
        return response.status, await response.read(1024)
    finally:
        await response.aclose()


def answer(
    data: bytes, headers: list[tuple[bytes, bytes]] | None = None, status: int = 200
) -> Handler:
    return sends(http_response(status, data, headers=headers))


FIRST_EVENT_THEN_SILENCE = stalls_after(stream_start(b"data: 1\n\n"))


async def test_settings_name_the_implementation(connect: Callable[..., UpstreamClient]) -> None:
    assert isinstance(connect("aiohttp", "http://127.0.0.1:1"), AiohttpUpstream)
    assert isinstance(connect("httpx", "http://127.0.0.1:1"), HttpxUpstream)
    assert isinstance(connect("httptools", "http://127.0.0.1:1"), HttptoolsUpstream)
    with pytest.raises(ValueError, match="plain HTTP only"):
        connect("httptools", "https://127.0.0.1:1")
    # An injected transport is always the httpx client: that is how tests mock the engine.
    injected = make_upstream(
        make_settings("aiohttp", "http://127.0.0.1:1"),
        transport=httpx.MockTransport(lambda r: httpx.Response(200)),
    )
    assert isinstance(injected, HttpxUpstream)
    await injected.aclose()


async def test_request_reaches_the_engine_as_given(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(answer(b"{}", JSON)) as engine:
        upstream = connect(upstream_client, engine.url)
        body = b'{"model": "m",  "seed": 7}'
        headers = [(b"x-request-id", b"abc"), (b"content-type", b"application/json")]
        response = await upstream.request(
            "POST", "/v1/chat/completions?x=1", headers=headers, body=body
        )
        assert await response.read(1024) == b"{}"
        await response.aclose()
    seen = engine.requests[0]
    assert (seen.method, seen.target, seen.body) == ("POST", "/v1/chat/completions?x=1", body)
    assert seen.header(b"x-request-id") == b"abc"
    assert seen.header(b"content-type") == b"application/json"
    assert seen.header(b"content-length") == str(len(body)).encode()
    assert seen.header(b"host") == engine.url.removeprefix("http://").encode()


async def test_no_content_type_is_invented(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(answer(b"[]")) as engine:
        upstream = connect(upstream_client, engine.url)
        await fetch(upstream, body=b"abc")
        await fetch(upstream, "GET", "/v1/models", body=b"")
    post, get = engine.requests
    assert post.header(b"content-type") is None
    assert get.body == b""
    assert get.header(b"content-type") is None


async def test_answer_is_decoded_with_lower_case_headers(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    packed = gzip.compress(b'{"ok": true}')
    headers = [(b"Content-Encoding", b"gzip"), (b"X-Engine", b"E")]
    async with FakeEngine(answer(packed, headers, status=201)) as engine:
        upstream = connect(upstream_client, engine.url)
        response = await upstream.request("GET", "/v1/models", headers=[], body=b"")
        assert response.status == 201
        assert (b"x-engine", b"E") in response.headers
        assert b"content-encoding" not in dict(response.headers)
        assert await response.read(1024) == b'{"ok": true}'
        await response.aclose()


async def test_redirects_are_not_followed(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    moved = answer(b"", [(b"location", b"/elsewhere")], status=307)
    async with FakeEngine(moved) as engine:
        upstream = connect(upstream_client, engine.url)
        status, _ = await fetch(upstream)
        assert status == 307
    assert len(engine.requests) == 1


async def test_finished_answers_reuse_the_connection(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(answer(b"{}", JSON)) as engine:
        upstream = connect(upstream_client, engine.url)
        for _ in range(3):
            await fetch(upstream)
    assert len(engine.connections) == 1


async def test_stream_chunks_arrive_as_they_are_sent(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    received = asyncio.Event()
    async with FakeEngine(
        sends_when(stream_start(b"data: 1\n\n"), stream_end(), received)
    ) as engine:
        upstream = connect(upstream_client, engine.url)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        chunks = response.chunks()
        assert await anext(chunks) == b"data: 1\n\n"
        received.set()
        assert [c async for c in chunks] == [b"data: [DONE]\n\n"]
        await response.aclose()
        # The stream was read to its end: the connection goes back to the pool.
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        await response.aclose()
    assert len(engine.connections) == 1


async def test_abandoned_stream_closes_the_connection(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(FIRST_EVENT_THEN_SILENCE) as engine:
        upstream = connect(upstream_client, engine.url)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        assert await anext(response.chunks()) == b"data: 1\n\n"
        await response.aclose()
        await engine.connection_closed.wait()
    assert engine.closed_connections == 1


async def test_refused_connection_is_unreachable(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    upstream = connect(upstream_client, refused_url())
    with pytest.raises(UpstreamUnreachable, match="unreachable"):
        await upstream.request("POST", "/v1/x", headers=[], body=b"{}")


async def test_connect_timeout_is_unreachable(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    with unanswered_url() as url:
        upstream = connect(upstream_client, url, connect=0.2)
        with pytest.raises(UpstreamUnreachable, match="did not accept a connection"):
            await upstream.request("POST", "/v1/x", headers=[], body=b"{}")


async def test_no_answer_within_the_response_time_out(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(stalls_after()) as engine:
        upstream = connect(upstream_client, engine.url, response=0.2, stream_idle=30)
        with pytest.raises(UpstreamTimeout):
            await upstream.request("POST", "/v1/x", headers=[], body=b"{}")


async def test_whole_answer_is_bounded_by_the_response_time_out(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    half = stalls_after(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345")
    async with FakeEngine(half) as engine:
        # The time-out runs from the request on: long enough for the connect and the head
        # on a loaded machine (0.3 s was not, under two pytest-xdist workers), so that it
        # is the body it cuts.
        upstream = connect(upstream_client, engine.url, response=3, stream_idle=30)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        with pytest.raises(UpstreamTimeout, match="did not finish"):
            await response.read(1024)
        await response.aclose()


async def test_silent_stream_times_out(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(FIRST_EVENT_THEN_SILENCE) as engine:
        upstream = connect(upstream_client, engine.url, stream_idle=0.2)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        chunks = response.chunks()
        assert await anext(chunks) == b"data: 1\n\n"
        with pytest.raises(UpstreamTimeout, match="went silent"):
            await anext(chunks)
        await response.aclose()


async def test_answer_over_the_limit_is_a_protocol_error(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    async with FakeEngine(answer(b"x" * 5000)) as engine:
        upstream = connect(upstream_client, engine.url)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        with pytest.raises(UpstreamProtocolError, match="larger than"):
            await response.read(1024)
        await response.aclose()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345", id="short-body"),
        pytest.param(stream_start(b"data: 1\n\n") + b"5\r\nda", id="cut-chunk"),
    ],
)
async def test_engine_hanging_up_mid_answer_is_a_protocol_error(
    upstream_client: str, connect: Callable[..., UpstreamClient], data: bytes
) -> None:
    async with FakeEngine(sends(data, then_hang_up=True)) as engine:
        upstream = connect(upstream_client, engine.url)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        with pytest.raises(UpstreamProtocolError, match="closed the connection"):
            async for _ in response.chunks():
                pass
        await response.aclose()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="no-answer"),
        pytest.param(b"SPDY/9 whatever\r\n\r\n", id="not-http"),
    ],
)
async def test_engine_answering_no_http_is_a_protocol_error(
    upstream_client: str, connect: Callable[..., UpstreamClient], data: bytes
) -> None:
    async with FakeEngine(sends(data, then_hang_up=True)) as engine:
        upstream = connect(upstream_client, engine.url)
        with pytest.raises(UpstreamProtocolError):
            await upstream.request("POST", "/v1/x", headers=[], body=b"{}")


async def test_httptools_pool_closes_connections_idle_past_keep_alive(
    connect: Callable[..., UpstreamClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.upstream.httptools_impl._KEEPALIVE_EXPIRY", -1.0)
    async with FakeEngine(answer(b"{}", JSON)) as engine:
        upstream = connect("httptools", engine.url)
        for _ in range(2):
            await fetch(upstream)
        await engine.connection_closed.wait()
    assert len(engine.connections) == 2


def _done_first(rest: bytes, go: asyncio.Event) -> Handler:
    """The first request gets a stream of ``[DONE]`` alone, then, once ``go`` is set,
    ``rest`` (and, unless that ends the body, nothing more); every other one a JSON
    answer."""
    answered: list[int] = []

    async def handler(request: Seen, wire: Wire) -> None:
        if answered:
            await wire.send(http_response(200, b"{}", headers=JSON))
            return
        answered.append(1)
        await wire.send(stream_start(DONE))
        await go.wait()
        await wire.send(rest)
        if not rest.endswith(LAST_CHUNK):
            await wire.until_client_leaves()

    return handler


async def _finish_at_done(upstream: UpstreamClient) -> None:
    """A stream read as the relay reads one: up to its end event, then finished, closed."""
    response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
    assert await anext(response.chunks()) == DONE
    response.finish()
    await response.aclose()


@pytest.mark.parametrize("name", ["aiohttp", "httptools"])
async def test_a_stream_finished_at_its_end_event_keeps_its_connection(
    name: str, connect: Callable[..., UpstreamClient]
) -> None:
    # (httpx closes a connection whose body was not read to its end: httpcore's rule.)
    async with FakeEngine(sends(stream_start(DONE) + LAST_CHUNK)) as engine:
        upstream = connect(name, engine.url)
        await _finish_at_done(upstream)
        await _finish_at_done(upstream)
    assert len(engine.connections) == 1


async def test_httptools_keeps_a_finished_streams_connection_when_its_end_comes_late(
    connect: Callable[..., UpstreamClient],
) -> None:
    go = asyncio.Event()
    async with FakeEngine(_done_first(LAST_CHUNK, go)) as engine:
        upstream = connect("httptools", engine.url)
        await _finish_at_done(upstream)
        go.set()  # the body's end comes after the stream was finished and closed
        pool = cast(HttptoolsUpstream, upstream)
        await until(lambda: len(pool._idle) == 1, "the connection back in the pool")
        assert (await fetch(upstream))[0] == 200
    assert len(engine.connections) == 1


@pytest.mark.parametrize(
    "rest",
    [
        pytest.param(b"", id="silence"),
        pytest.param(chunk(b"data: more\n\n" * 1000) * 100, id="more-events"),
    ],
)
async def test_httptools_closes_a_finished_streams_connection_whose_body_does_not_end(
    connect: Callable[..., UpstreamClient], rest: bytes
) -> None:
    go = asyncio.Event()
    async with FakeEngine(_done_first(rest, go)) as engine:
        upstream = connect("httptools", engine.url)
        await _finish_at_done(upstream)
        go.set()
        await engine.connection_closed.wait()  # after 1 s of silence, or 64 KiB more
        assert (await fetch(upstream))[0] == 200
    assert len(engine.connections) == 2


async def test_httptools_stops_reading_an_engine_faster_than_its_reader(
    connect: Callable[..., UpstreamClient],
) -> None:
    # 16 MiB of events written as fast as the socket takes them, to a reader that
    # waits first: reading stops past the high water (so the engine's writes stall,
    # not the gateway's memory grow), starts again once the reader took the buffer,
    # and every byte arrives, in order.
    events = [b"data: %06d %s\n\n" % (i, b"x" * 16_000) for i in range(1024)]
    async with FakeEngine(sends(stream_start(*events) + LAST_CHUNK)) as engine:
        pool = cast(HttptoolsUpstream, connect("httptools", engine.url))
        response = await pool.request("POST", "/v1/x", headers=[], body=b"{}")
        (connection,) = pool._all
        await until(lambda: connection.paused, "reading paused")
        exchange = connection.exchange
        assert exchange is not None
        held = sum(len(data) for data in exchange.buffer)
        assert 256 * 1024 < held < 2 * 1024 * 1024
        assert engine.requests[0].sent < len(b"".join(events))  # the engine waits
        received = b"".join([data async for data in response.chunks()])
        assert received == b"".join(events)
        await response.aclose()
    assert len(engine.connections) == 1


async def test_trailers_are_not_the_answers_headers(
    upstream_client: str, connect: Callable[..., UpstreamClient]
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    head += b"transfer-encoding: chunked\r\n\r\n"
    async with FakeEngine(sends(head + chunk(b"{}") + b"0\r\nx-trailer: t\r\n\r\n")) as engine:
        upstream = connect(upstream_client, engine.url)
        for _ in range(2):  # (the second on the same connection: nothing of the first's)
            response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
            assert await response.read(1024) == b"{}"
            assert b"x-trailer" not in dict(response.headers)
            await response.aclose()
    assert len(engine.connections) == 1


async def test_httptools_counts_a_head_near_its_limit_once(
    connect: Callable[..., UpstreamClient],
) -> None:
    # A head just under 64 KiB in a read of its own, then a read with no body byte (a
    # long chunk extension): the head is the head's room's, not the body's framing.
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-big: " + b"b" * 65_000
    extension = b"2;" + b"e" * 1000 + b"\r\n"

    async def handler(request: Seen, wire: Wire) -> None:
        await wire.send(head + b"\r\n\r\n")
        await asyncio.sleep(0.05)
        await wire.send(extension)
        await asyncio.sleep(0.05)
        await wire.send(b"{}\r\n" + LAST_CHUNK)

    async with FakeEngine(handler) as engine:
        upstream = connect("httptools", engine.url)
        response = await upstream.request("POST", "/v1/x", headers=[], body=b"{}")
        assert await response.read(1024) == b"{}"
        await response.aclose()
