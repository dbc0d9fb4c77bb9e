"""A fast fake OpenAI engine: precomputed chat answers and 64-chunk SSE streams.

It exists so that the benchmark measures the proxy, not the engine: one asyncio
Protocol per connection on uvloop, httptools for parsing, and every response
byte string built once at startup. Keep-alive is the default (HTTP/1.1), since
wrk and every proxy under test reuse connections.

Routes: ``POST /v1/chat/completions`` (streams when the body holds
``"stream": true``; found by a byte search, not by parsing JSON),
``POST /v1/embeddings`` (16 vectors of 1,536 floats, whatever was asked, or as
wide as the ``x-fake-embeddings-width`` header says), ``GET /v1/models`` and ``GET /health``
(an empty 200, as vLLM's and SGLang's: what the Rust routers probe before they route).
Streams wait ``chunk_delay_ms`` between chunks: the ``--chunk-delay-ms`` flag, or per
request the ``x-fake-chunk-delay-ms`` header.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import re
from typing import Any, cast

import httptools
import orjson

CHUNKS = 64
MODEL = "fake-model"
DELAY_HEADER = b"x-fake-chunk-delay-ms"
WIDTH_HEADER = b"x-fake-embeddings-width"

_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')
_WORDS = ["Hello", " from", " the", " fake", " engine", "."]


def _http_head(status: str, content_type: bytes, *, length: int | None) -> bytes:
    framing = b"transfer-encoding: chunked" if length is None else b"content-length: %d" % length
    return (
        b"HTTP/1.1 " + status.encode() + b"\r\n"
        b"content-type: " + content_type + b"\r\n" + framing + b"\r\n"
        b"server: fake-engine\r\n\r\n"
    )


def _json_response(status: str, payload: object) -> bytes:
    body = orjson.dumps(payload)
    return _http_head(status, b"application/json", length=len(body)) + body


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def completion_body() -> dict[str, Any]:
    """The non-streaming chat completion every request gets."""
    text = "".join(_WORDS[i % len(_WORDS)] for i in range(CHUNKS))
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": CHUNKS, "total_tokens": 12 + CHUNKS},
    }


EMBEDDINGS = 16
WIDTH = 1536


def embeddings_body(width: int = WIDTH) -> dict[str, Any]:
    """The embeddings answer: ``EMBEDDINGS`` float vectors of ``width``."""
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": [((i * 7919 + j * 104729) % 20011) / 20011 - 0.5 for j in range(width)],
        }
        for i in range(EMBEDDINGS)
    ]
    usage = {"prompt_tokens": 16 * EMBEDDINGS, "total_tokens": 16 * EMBEDDINGS}
    return {"object": "list", "data": data, "model": MODEL, "usage": usage}


def stream_events() -> list[bytes]:
    """The SSE events of a streamed answer: ``CHUNKS`` JSON chunks, then ``[DONE]``."""
    events = []
    for i in range(CHUNKS):
        delta = {"role": "assistant"} if i == 0 else {}
        delta["content"] = _WORDS[i % len(_WORDS)]
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": "stop" if i == CHUNKS - 1 else None,
                }
            ],
        }
        events.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


@functools.lru_cache(maxsize=8)
def _narrow_embeddings(width: int) -> bytes:
    """The embeddings answer with vectors of ``width`` (built once per width)."""
    return _json_response("200 OK", embeddings_body(width))


class _Wire:
    """Every response as ready-to-write bytes."""

    def __init__(self) -> None:
        self.completion = _json_response("200 OK", completion_body())
        self.embeddings = _json_response("200 OK", embeddings_body())
        self.models = _json_response(
            "200 OK",
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]},
        )
        self.health = _http_head("200 OK", b"application/json", length=0)
        self.not_found = _json_response(
            "404 Not Found",
            {"error": {"message": "not found", "type": "invalid_request_error", "code": None}},
        )
        chunks = [_http_chunk(e) for e in stream_events()]
        self.stream_head = _http_head("200 OK", b"text/event-stream", length=None)
        # The last JSON chunk, [DONE] and the terminating chunk go out in one write,
        # the way engines send [DONE] right after the final chunk.
        self.stream_parts = chunks[:-2] + [chunks[-2] + chunks[-1] + b"0\r\n\r\n"]
        self.stream_whole = self.stream_head + b"".join(self.stream_parts)


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, answer in order."""

    def __init__(self, wire: _Wire, default_delay_ms: float) -> None:
        self._wire = wire
        self._default_delay = default_delay_ms / 1000.0
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._url = b""
        self._body: list[bytes] = []
        self._delay: float | None = None
        self._width: int | None = None
        self._queue: collections.deque[tuple[bytes | None, float, bool]] = collections.deque()
        self._streaming = False
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []
        self._delay = None
        self._width = None

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == len(DELAY_HEADER) and name.lower() == DELAY_HEADER:
            self._delay = float(value) / 1000.0
        elif len(name) == len(WIDTH_HEADER) and name.lower() == WIDTH_HEADER:
            self._width = int(value)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        url = self._url
        method = self._parser.get_method()
        keep_alive = self._parser.should_keep_alive()
        response: bytes | None
        if method == b"POST" and url.startswith(b"/v1/chat/completions"):
            body = b"".join(self._body)
            response = None if _STREAM_TRUE.search(body) else self._wire.completion
        elif method == b"POST" and url.startswith(b"/v1/embeddings"):
            width = self._width
            response = self._wire.embeddings if width is None else _narrow_embeddings(width)
        elif method == b"GET" and url.startswith(b"/v1/models"):
            response = self._wire.models
        elif method == b"GET" and url == b"/health":
            response = self._wire.health
        else:
            response = self._wire.not_found
        delay = self._default_delay if self._delay is None else self._delay
        self._queue.append((response, delay, keep_alive))
        if not self._streaming:
            self._drain_queue()

    # responses
    def _drain_queue(self) -> None:
        while self._queue and self._transport is not None:
            response, delay, keep_alive = self._queue.popleft()
            if response is not None:
                self._transport.write(response)
            elif delay <= 0:
                self._transport.write(self._wire.stream_whole)
            else:
                self._streaming = True
                self._transport.write(self._wire.stream_head + self._wire.stream_parts[0])
                self._schedule(1, delay, keep_alive)
                return
            if not keep_alive:
                self._transport.close()
                return

    def _schedule(self, index: int, delay: float, keep_alive: bool) -> None:
        self._timer = self._loop.call_later(delay, self._send_part, index, delay, keep_alive)

    def _send_part(self, index: int, delay: float, keep_alive: bool) -> None:
        self._timer = None
        if self._transport is None:
            return
        parts = self._wire.stream_parts
        self._transport.write(parts[index])
        if index + 1 < len(parts):
            self._schedule(index + 1, delay, keep_alive)
            return
        self._streaming = False
        if not keep_alive:
            self._transport.close()
            return
        self._drain_queue()


async def start_engine(
    host: str = "127.0.0.1", port: int = 0, *, chunk_delay_ms: float = 0.0
) -> asyncio.Server:
    """Listen on ``host:port`` (0: any free port) and serve until the server is closed."""
    wire = _Wire()
    factory = functools.partial(_Connection, wire, chunk_delay_ms)
    loop = asyncio.get_running_loop()
    return await loop.create_server(factory, host, port, backlog=4096, reuse_address=True)


async def _serve(host: str, port: int, chunk_delay_ms: float) -> None:
    server = await start_engine(host, port, chunk_delay_ms=chunk_delay_ms)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.fake_engine --port P [--chunk-delay-ms D]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
        asyncio.run(_serve(args.host, args.port, args.chunk_delay_ms))
    else:
        uvloop.run(_serve(args.host, args.port, args.chunk_delay_ms))


if __name__ == "__main__":
    main()
