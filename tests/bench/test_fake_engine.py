"""The fake engine's wire format, over a real loopback socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from bench.fake_engine import CHUNKS, EMBEDDINGS, WIDTH, start_engine

pytestmark = pytest.mark.anyio

CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
STREAM = b'{"model":"m","messages":[{"role":"user","content":"hi"}], "stream": true}'


@pytest.fixture
async def engine() -> AsyncIterator[tuple[str, int]]:
    server = await start_engine("127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    async with server:
        yield host, port


def _request(method: str, path: str, body: bytes = b"", *, extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")[:-2]
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    if "content-length" in headers:
        return (
            int(status_line.split()[1]),
            headers,
            await reader.readexactly(int(headers["content-length"])),
        )
    assert headers["transfer-encoding"] == "chunked"
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return int(status_line.split()[1]), headers, body
        body += chunk[:-2]


async def _exchange(
    address: tuple[str, int], *requests: bytes
) -> list[tuple[int, dict[str, str], bytes]]:
    """Send each request on one connection, reading each answer before the next request."""
    reader, writer = await asyncio.open_connection(*address)
    answers = []
    try:
        for request in requests:
            writer.write(request)
            answers.append(await _read_response(reader))
    finally:
        writer.close()
        await writer.wait_closed()
    return answers


async def test_chat_answer_is_one_json_completion(engine: tuple[str, int]) -> None:
    [(status, headers, body)] = await _exchange(
        engine, _request("POST", "/v1/chat/completions", CHAT)
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["choices"][0]["finish_reason"] == "stop"


async def test_stream_is_64_chunks_then_done(engine: tuple[str, int]) -> None:
    [(status, headers, body)] = await _exchange(
        engine, _request("POST", "/v1/chat/completions", STREAM)
    )
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = body.split(b"\n\n")
    assert events[-1] == b""
    events = events[:-1]
    assert len(events) == CHUNKS + 1
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks][-2:] == [None, "stop"]


async def test_paced_stream_has_the_same_events(engine: tuple[str, int]) -> None:
    request = _request(
        "POST", "/v1/chat/completions", STREAM, extra="x-fake-chunk-delay-ms: 0.1\r\n"
    )
    [(status, _, body)] = await _exchange(engine, request)
    assert status == 200
    assert body.count(b"data: {") == CHUNKS
    assert body.endswith(b"data: [DONE]\n\n")


async def test_two_requests_share_one_connection(engine: tuple[str, int]) -> None:
    answers = await _exchange(
        engine,
        _request("POST", "/v1/chat/completions", STREAM),
        _request("GET", "/v1/models"),
        _request("POST", "/v1/chat/completions", CHAT),
    )
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert json.loads(answers[1][2])["data"][0]["id"] == "fake-model"
    assert json.loads(answers[2][2])["object"] == "chat.completion"


async def test_embeddings_are_full_width_unless_a_header_narrows_them(
    engine: tuple[str, int],
) -> None:
    body = b'{"model":"m","input":"hi"}'
    answers = await _exchange(
        engine,
        _request("POST", "/v1/embeddings", body),
        _request("POST", "/v1/embeddings", body, extra="x-fake-embeddings-width: 64\r\n"),
        _request("POST", "/v1/embeddings", body),  # the width is the request's alone
    )
    widths = [[len(d["embedding"]) for d in json.loads(a)["data"]] for _, _, a in answers]
    assert widths == [[WIDTH] * EMBEDDINGS, [64] * EMBEDDINGS, [WIDTH] * EMBEDDINGS]
    assert len(answers[1][2]) < 64 * 1024  # one loopback segment (bench/callcount.py)


async def test_unknown_path_is_404(engine: tuple[str, int]) -> None:
    [(status, _, body)] = await _exchange(engine, _request("GET", "/nope"))
    assert status == 404
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


async def test_health_is_an_empty_200_as_the_routers_probe_it(engine: tuple[str, int]) -> None:
    answers = await _exchange(engine, _request("GET", "/health"), _request("GET", "/healthz"))
    assert [(status, body) for status, _, body in answers] == [(200, b""), (404, answers[1][2])]
