"""SSE events split and checked (events.py), and the relay's answer to broken streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from gateway.proxy.events import MAX_EVENT_BYTES, EventSplitter
from gateway.proxy.relay import DONE, relay_stream
from tests.support.bodies import error_event, sse_events

CHUNK = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'


async def relay(*pieces: bytes, max_bytes: int | None = None) -> bytes:
    async def engine() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return b"".join([c async for c in relay_stream(engine(), max_bytes=max_bytes)])


@pytest.mark.parametrize(
    "stream",
    [
        [CHUNK, DONE],
        [CHUNK + DONE],
        [CHUNK[:5], CHUNK[5:20], CHUNK[20:] + DONE[:3], DONE[3:]],
        [CHUNK.replace(b"\n", b"\r\n"), DONE.replace(b"\n", b"\r\n")],
        [b": keep-alive\n\n", b"event: message\nid: 7\nretry: 10\n" + CHUNK, DONE],
        [b'data: {"a":\ndata: 1}\n\n', DONE],  # one event over two data lines
    ],
)
def test_good_streams_pass_byte_for_byte(stream: list[bytes]) -> None:
    splitter = EventSplitter()
    out = b""
    for chunk in stream:
        events, error = splitter.feed(chunk)
        assert error is None
        out += events
    assert out == b"".join(stream)
    assert splitter.done and not splitter.pending


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
async def test_bytes_after_done_are_read_but_not_sent() -> None:
    assert await relay(CHUNK, DONE, b"data: late\n\n") == CHUNK + DONE


@pytest.mark.anyio
async def test_stream_ending_mid_event_gets_an_error_event() -> None:
    out = await relay(CHUNK, b'data: {"unfinished')
    assert out.startswith(CHUNK) and b"unfinished" not in out
    assert error_event(out)["code"] == "upstream_protocol_error"
