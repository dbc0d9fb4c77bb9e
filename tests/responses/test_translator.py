"""StreamTranslator (pure) and the Responses routes' stream shapers, fed raw SSE text
through the one relay loop: no HTTP, no engine, the bytes in and the events out."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.proxy.relay import relay_stream
from gateway.responses.native import NativeStream
from gateway.responses.route import Plan, TranslatedStream
from gateway.responses.stream import StreamTranslator
from tests.support.responses import response_events

pytestmark = pytest.mark.anyio


def translator() -> StreamTranslator:
    ids = itertools.count()
    return StreamTranslator(
        "resp_1",
        {"model": "m"},
        created_at=1,
        new_id=lambda prefix: f"{prefix}_{next(ids)}",
        stored=False,
    )


class Kept:
    """Where the translate route's shaper stores a finished response (its ``keep``)."""

    def __init__(self) -> None:
        self.responses: list[dict[str, Any]] = []

    async def __call__(self, plan: Plan, response: dict[str, Any]) -> None:
        self.responses.append(response)


def translated(kept: Kept | None = None) -> TranslatedStream:
    plan = Plan(response_id="resp_1", request={"model": "m"}, owner="", store=False, items=[])
    return TranslatedStream(plan, keep=kept if kept is not None else Kept())


async def feed(*pieces: str) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece.encode()


async def relayed(shaper: Any, *pieces: str) -> list[tuple[str, dict[str, Any]]]:
    out = b"".join([c async for c in relay_stream(feed(*pieces), shaper)])
    return response_events(out)


def delta(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"


def test_a_chat_chunk_becomes_its_events_at_once() -> None:
    t = translator()
    head = response_events(t.start())
    assert [name for name, _ in head] == ["response.created", "response.in_progress"]
    first = response_events(t.chunk({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}))
    assert [name for name, _ in first] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    [(name, data)] = response_events(
        t.chunk({"choices": [{"index": 0, "delta": {"content": "lo"}}]})
    )
    assert name == "response.output_text.delta" and data["delta"] == "lo"
    assert data["sequence_number"] == 5
    assert t.chunk({"choices": []}) == b""


def test_usage_and_finish_reason_make_the_final_response() -> None:
    t = translator()
    t.start()
    t.chunk({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "length"}]})
    t.chunk({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    names = [name for name, _ in response_events(t.finish())]
    assert names == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    final = t.final or {}
    assert final["status"] == "incomplete"
    assert final["usage"]["input_tokens"] == 3 and final["usage"]["output_tokens"] == 1
    [(name, data)] = response_events(t.final_event(final))
    assert name == "response.incomplete" and data["response"]["id"] == "resp_1"


def test_going_back_to_a_finished_tool_call_is_refused() -> None:
    t = translator()
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}
    t.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    t.chunk({"choices": [{"index": 0, "delta": {"content": "x"}}]})
    with pytest.raises(UpstreamProtocolError, match="went back"):
        t.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})


async def test_raw_sse_in_any_pieces_gives_the_whole_event_sequence() -> None:
    text = delta("Hel") + delta("lo") + "data: [DONE]\n\n"
    for cut in (1, 7, len(text) // 2, len(text) - 1):
        kept = Kept()
        events = await relayed(translated(kept), text[:cut], text[cut:])
        assert [r["id"] for r in kept.responses] == ["resp_1"]
        names = [name for name, _ in events]
        assert names[:2] == ["response.created", "response.in_progress"]
        assert names[-1] == "response.completed"
        deltas = [data["delta"] for name, data in events if name == "response.output_text.delta"]
        assert deltas == ["Hel", "lo"]
        assert [data["sequence_number"] for _, data in events] == list(range(len(events)))


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        ('error: {"code": 400, "message": "context full"}\n\n', None),
        ("data: {not json}\n\n", "upstream_protocol_error"),
        ("", "upstream_protocol_error"),  # no [DONE]: cut short
    ],
)
async def test_a_broken_chat_stream_ends_with_error_and_response_failed(
    tail: str, code: str | None
) -> None:
    events = await relayed(translated(), delta("a"), tail)
    names = [name for name, _ in events]
    assert names[-2:] == ["error", "response.failed"]
    assert events[-2][1]["code"] == code
    assert events[-1][1]["response"]["status"] == "failed"


def native_event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: " + json.dumps({"type": kind, **data}) + "\n\n"


RESPONSE = {"id": "resp_e", "object": "response", "status": "in_progress", "output": []}


async def test_a_native_stream_passes_through_and_reads_its_final_usage() -> None:
    shaper = NativeStream()
    done = RESPONSE | {"status": "completed", "usage": {"input_tokens": 2, "output_tokens": 5}}
    pieces = [
        native_event("response.created", sequence_number=0, response=RESPONSE),
        native_event("response.output_text.delta", sequence_number=1, delta="hi"),
        native_event("response.completed", sequence_number=2, response=done),
        "data: ignored after the end\n\n",
    ]
    out = b"".join([c async for c in relay_stream(feed(*pieces), shaper)])
    assert out == "".join(pieces[:3]).encode()
    assert shaper.ended
    assert shaper.usage is not None and (shaper.usage.prompt, shaper.usage.completion) == (2, 5)


async def test_a_native_stream_cut_short_ends_with_error_and_response_failed() -> None:
    pieces = [native_event("response.created", sequence_number=0, response=RESPONSE)]
    events = await relayed(NativeStream(), *pieces)
    assert [name for name, _ in events] == ["response.created", "error", "response.failed"]
    assert [data["sequence_number"] for _, data in events] == [0, 1, 2]
    assert events[-1][1]["response"]["id"] == "resp_e"
