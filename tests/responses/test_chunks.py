"""ChunkReader: an engine's chat stream split into parsed chunks, fed in any pieces."""

from __future__ import annotations

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.proxy.events import MAX_EVENT_BYTES, EngineStreamError
from gateway.responses.chunks import ChunkReader

A = b'data: {"a":1}\n\n'
B = b'data: {"b":2}\n\n'
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    "pieces",
    [
        [A + B + DONE],
        [A, B, DONE],
        [A[:5], A[5:] + B[:9], B[9:] + DONE],
        [(A + B + DONE).replace(b"\n", b"\r\n")],
        [b': keep-alive\n\nevent: chunk\nid: 7\ndata: {"a":1}\n\n', B, DONE],
        [b'data: {"a":\ndata: 1}\n\n', B, DONE],
        [b"retry: 10\n\n", A, B, DONE],
    ],
)
def test_whole_events_in_any_pieces(pieces: list[bytes]) -> None:
    reader = ChunkReader()
    chunks = []
    for piece in pieces:
        got, error = reader.feed(piece)
        assert error is None
        chunks += got
    assert chunks == [{"a": 1}, {"b": 2}]
    assert reader.done


def test_done_ends_the_stream_mid_block() -> None:
    reader = ChunkReader()
    assert reader.feed(A + DONE + B) == ([{"a": 1}], None)
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
    ],
)
def test_a_broken_event_ends_the_stream(data: bytes, kind: type, message: str) -> None:
    chunks, error = ChunkReader().feed(data)
    assert error is not None and isinstance(error, kind)
    assert message in error.message
    assert chunks == ([{"a": 1}] if data.startswith(A) else [])


def test_an_unfinished_event_past_the_limit_is_refused() -> None:
    reader = ChunkReader()
    assert reader.feed(b'data: {"a":"') == ([], None)
    chunks, error = reader.feed(b"x" * MAX_EVENT_BYTES)
    assert chunks == [] and error is not None and "1 MiB" in error.message
