"""The one SSE reader (events.py): whole events split, checked and parsed once, fed in any
pieces, and the relay's answer to broken streams. One table serves the chat routes' use
(the bytes, byte for byte) and the Responses translation's (the parsed chunks)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.proxy.events import MAX_EVENT_BYTES, EngineStreamError, EventReader
from gateway.proxy.relay import DONE, relay_stream
from tests.support.bodies import error_event, sse_events

CHUNK = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'


async def relay(*pieces: bytes, max_bytes: int | None = None) -> bytes:
    async def engine() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return b"".join([c async for c in relay_stream(engine(), max_bytes=max_bytes)])


CHUNK_DATA = {"choices": [{"delta": {"content": "x"}}]}
A = b'data: {"a":1}\n\n'
B = b'data: {"b":2}\n\n'
AB = [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("stream", "chunks"),
    [
        ([CHUNK, DONE], [CHUNK_DATA]),
        ([CHUNK + DONE], [CHUNK_DATA]),
        ([CHUNK[:5], CHUNK[5:20], CHUNK[20:] + DONE[:3], DONE[3:]], [CHUNK_DATA]),
        ([CHUNK.replace(b"\n", b"\r\n"), DONE.replace(b"\n", b"\r\n")], [CHUNK_DATA]),
        ([b": keep-alive\n\n", b"event: message\nid: 7\nretry: 10\n" + CHUNK, DONE], [CHUNK_DATA]),
        ([b'data: {"a":\ndata: 1}\n\n', DONE], [{"a": 1}]),  # one event over two data lines
        ([A + B + DONE], AB),
        ([A, B, DONE], AB),
        ([A[:5], A[5:] + B[:9], B[9:] + DONE], AB),
        ([(A + B + DONE).replace(b"\n", b"\r\n")], AB),
        ([b': keep-alive\n\nevent: chunk\nid: 7\ndata: {"a":1}\n\n', B, DONE], AB),
        ([b'data: {"a":\ndata: 1}\n\n', B, DONE], AB),
        ([b"retry: 10\n\n", A, B, DONE], AB),
    ],
)
def test_good_streams_pass_byte_for_byte_each_event_parsed_once(
    stream: list[bytes], chunks: list[dict[str, object]]
) -> None:
    reader = EventReader()
    out = b""
    parsed: list[object] = []
    for chunk in stream:
        events, values, error = reader.feed(chunk)
        assert error is None
        out += events
        parsed += values
    assert out == b"".join(stream)
    assert parsed == chunks
    assert reader.done and not reader.pending


def test_done_ends_the_stream_mid_block() -> None:
    reader = EventReader()
    assert reader.feed(A + DONE + B) == (A + DONE, [{"a": 1}], None)
    assert reader.done


@pytest.mark.parametrize(
    ("data", "kind", "message"),
    [
        (b"data: {nope\n\n", UpstreamProtocolError, "not valid JSON"),
        (b"data: [1]\n\n", UpstreamProtocolError, "not a JSON object"),
        (A + b"data: [1]\n\n", UpstreamProtocolError, "not a JSON object"),
        (b"wat: 1\n\n", UpstreamProtocolError, "not a server-sent event field"),
        (
            b'data: {"error": {"message": "KV cache full", "code": 400}}\n\n',
            EngineStreamError,
            "KV cache full",
        ),
        # llama.cpp's error line: the engine's error, on every route that reads a stream.
        (b'error: {"code": 400, "message": "KV cache full"}\n\n', EngineStreamError, "KV cache"),
    ],
)
def test_a_broken_event_ends_the_stream_after_the_good_ones_parsed(
    data: bytes, kind: type, message: str
) -> None:
    events, chunks, error = EventReader().feed(data)
    assert error is not None and isinstance(error, kind)
    assert message in error.message
    good = data.startswith(A)
    assert chunks == ([{"a": 1}] if good else [])
    assert events == (A if good else b"")


def test_an_unfinished_event_past_the_limit_is_refused() -> None:
    reader = EventReader()
    assert reader.feed(b'data: {"a":"') == (b"", [], None)
    events, chunks, error = reader.feed(b"x" * MAX_EVENT_BYTES)
    assert events == b"" and chunks == []
    assert error is not None and "1 MiB" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stream", "kept"),
    [
        ([CHUNK, b"data: {not json}\n\n", DONE], 1),
        ([CHUNK + b"data: [1, 2]\n\n" + DONE], 1),  # JSON, but not an object
        ([b"<html>502 Bad Gateway</html>\n\n"], 0),
        ([CHUNK, b"garbage line\n\n", DONE], 1),
        ([CHUNK, b"data: \xff\xfe\n\n"], 1),  # not UTF-8
    ],
)
async def test_a_broken_event_ends_the_stream_after_the_good_ones(
    stream: list[bytes], kept: int
) -> None:
    out = await relay(*stream)
    assert out.startswith(CHUNK * kept)
    assert error_event(out)["code"] == "upstream_protocol_error"
    assert len(sse_events(out)) == kept + 2


@pytest.mark.anyio
async def test_engine_error_event_is_normalised_and_ends_the_stream() -> None:
    # vLLM's mid-stream error shape: an integer code, its own type name.
    leak = {
        "error": {
            "message": 'Traceback (most recent call last): File "/opt/vllm/x.py", line 3',
            "type": "InternalServerError",
            "code": 500,
        }
    }
    out = await relay(CHUNK, b"data: " + json.dumps(leak).encode() + b"\n\n", DONE)
    error = error_event(out)
    assert error["code"] == "upstream_error" and "vllm" not in out.decode()
    bad_request = {"error": {"message": "prompt too long", "type": "BadRequestError", "code": 400}}
    out = await relay(CHUNK, b"data: " + json.dumps(bad_request).encode() + b"\n\n", DONE)
    assert error_event(out) == {
        "message": "prompt too long",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


@pytest.mark.anyio
async def test_llama_cpp_error_line_becomes_an_error_event() -> None:
    out = await relay(
        CHUNK, b'error: {"code": 500, "message": "slot 3 failed", "type": "server"}\n\n'
    )
    assert error_event(out)["code"] == "upstream_error"
    assert "slot" not in out.decode()


@pytest.mark.anyio
async def test_an_endless_event_is_cut_at_the_event_limit() -> None:
    out = await relay(b'data: "' + b"x" * (MAX_EVENT_BYTES + 1))
    assert error_event(out)["code"] == "upstream_protocol_error"
    assert len(out) < 1024


@pytest.mark.anyio
async def test_a_stream_past_max_bytes_ends_with_an_error_event() -> None:
    out = await relay(*([CHUNK] * 100), DONE, max_bytes=10 * len(CHUNK))
    assert out.startswith(CHUNK * 10)
    assert "larger than the limit" in error_event(out)["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("pieces", [[CHUNK, DONE], [CHUNK + DONE]], ids=["apart", "together"])
async def test_nothing_after_done_is_read_nor_sent(pieces: list[bytes]) -> None:
    taken: list[bytes] = []

    async def engine() -> AsyncIterator[bytes]:
        for piece in [*pieces, b"data: late\n\n", b"data: later\n\n"]:
            taken.append(piece)
            yield piece

    out = b"".join([c async for c in relay_stream(engine())])
    assert out == CHUNK + DONE
    assert taken == pieces  # the stream ended at [DONE]: the engine's next bytes stay unread


@pytest.mark.anyio
async def test_stream_ending_mid_event_gets_an_error_event() -> None:
    out = await relay(CHUNK, b'data: {"unfinished')
    assert out.startswith(CHUNK) and b"unfinished" not in out
    assert error_event(out)["code"] == "upstream_protocol_error"
