"""system_fingerprint as the gateway stamps it: inserted as bytes into whole answers and
stream chunks that lack it (the engine's own is kept), at the cost of a replace."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import gateway.proxy.fingerprint as fingerprint_module
from gateway.app.factory import create_app
from gateway.proxy.fingerprint import stamp_answer, stamp_events
from gateway.proxy.openai import ChatStream
from tests.support.bodies import ANSWER, CHAT, DONE, chat, chunk_event, sse_events
from tests.support.gateways import MockEngine, asgi_client, gateway_settings

FP = b"fp_0123456789"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            b'{"id":"c1","choices":[]}',
            b'{"system_fingerprint":"fp_0123456789","id":"c1","choices":[]}',
        ),
        (b'{\n  "id": "c1"\n}', b'{"system_fingerprint":"fp_0123456789",\n  "id": "c1"\n}'),
        (
            b'{"id":"c1","system_fingerprint":null}',
            b'{"id":"c1","system_fingerprint":"fp_0123456789"}',
        ),
        (
            b'{"id":"c1","system_fingerprint": null }',
            b'{"id":"c1","system_fingerprint":"fp_0123456789" }',
        ),
        (
            b'{"id":"c1","system_fingerprint":"fp_engine"}',
            b'{"id":"c1","system_fingerprint":"fp_engine"}',
        ),
        (b"{}", b"{}"),
        (b'[{"id":"c1"}]', b'[{"id":"c1"}]'),
    ],
)
def test_a_whole_answer_gets_one_unless_the_engine_sent_its_own(
    answer: bytes, expected: bytes
) -> None:
    assert stamp_answer(answer, FP) == expected
    parsed = json.loads(answer)
    if isinstance(parsed, dict):  # the route passes the answer it parsed: the same bytes
        assert stamp_answer(answer, FP, parsed) == expected


def _chunk(**fields: Any) -> bytes:
    return b"data: " + json.dumps({"id": "c1", **fields}, separators=(",", ":")).encode() + b"\n\n"


def _fingerprints(events: bytes) -> list[Any]:
    found = []
    for line in events.split(b"\n"):
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            found.append(json.loads(line[5:]).get("system_fingerprint", "absent"))
    return found


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (_chunk() + _chunk() + b"data: [DONE]\n\n", ["fp_0123456789"] * 2),
        (_chunk(system_fingerprint=None), ["fp_0123456789"]),
        (_chunk(system_fingerprint="fp_engine") * 2, ["fp_engine"] * 2),
        (_chunk(system_fingerprint=None) + _chunk(), ["fp_0123456789"] * 2),
        (b'data:{"id":"c1"}\n\n', ["fp_0123456789"]),
        (b'event: x\ndata: { "id": "c1"}\n\n', ["fp_0123456789"]),
        (_chunk() + b'data: {"error":{"message":"m"}}\n\n', ["fp_0123456789", "absent"]),
        (b"data: [DONE]\n\n", []),
    ],
)
def test_each_stream_chunk_gets_one_unless_the_engine_sent_its_own(
    events: bytes, expected: list[Any]
) -> None:
    assert _fingerprints(stamp_events(events, FP)) == expected
    # The relay passes the chunk events the reader parsed: the same answer.
    chunks = [
        json.loads(line[5:])
        for line in events.split(b"\n")
        if line.startswith(b"data:") and b'"error"' not in line and b"[DONE]" not in line
    ]
    assert stamp_events(events, FP, chunks) == stamp_events(events, FP)


class _Scanned(bytes):
    """Bytes that count the scans made of them (a replace counted apart)."""

    def __init__(self, _: bytes) -> None:
        self.scans = 0
        self.replaces = 0

    def __contains__(self, item: Any) -> bool:
        self.scans += 1
        return super().__contains__(item)

    def count(self, *args: Any) -> int:
        self.scans += 1
        return super().count(*args)

    def find(self, *args: Any) -> int:
        self.scans += 1
        return super().find(*args)

    def replace(self, *args: Any) -> bytes:
        self.replaces += 1
        return super().replace(*args)


@pytest.mark.parametrize("hide", [False, True])
def test_a_relayed_block_without_usage_is_stamped_with_one_replace_and_no_scan(
    hide: bool,
) -> None:
    events = [_chunk(choices=[{"delta": {"content": f"w{i}"}}]) for i in range(8)]
    raw = _Scanned(b"".join(events) + b"data: [DONE]\n\n")
    chunks = [json.loads(e[6:]) for e in events]  # what the reader parsed
    out = ChatStream(hide=hide, fingerprint=FP).events(raw, chunks, done=True)
    assert _fingerprints(out) == ["fp_0123456789"] * 8
    assert out.endswith(b"data: [DONE]\n\n")
    # What the meter and the stamp look for is read from the parsed chunks.
    assert (raw.scans, raw.replaces) == (0, 1)


class _Counting:
    """A compiled pattern that counts its uses (the slow, regular-expression path)."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.calls = 0

    def sub(self, *args: Any, **kwargs: Any) -> bytes:
        self.calls += 1
        return self.pattern.sub(*args, **kwargs)


def test_engine_shaped_chunks_take_one_replace_and_no_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = {name: _Counting(getattr(fingerprint_module, name)) for name in ("_EVENT", "_NULL")}
    for name, wrapper in counting.items():
        monkeypatch.setattr(fingerprint_module, name, wrapper)
    loads = 0
    real_loads = json.loads

    def counting_loads(*args: Any, **kwargs: Any) -> Any:
        nonlocal loads
        loads += 1
        return real_loads(*args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    out = [stamp_events(_chunk(choices=[{"delta": {"content": f"w{i}"}}]), FP) for i in range(1000)]
    assert {name: c.calls for name, c in counting.items()} == {"_EVENT": 0, "_NULL": 0}
    assert loads == 0
    assert all(
        chunk.startswith(b'data: {"system_fingerprint":"fp_0123456789","id"') for chunk in out
    )


def _engine_answer(own: str | None) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        fields = {} if own is None else {"system_fingerprint": own}
        if json.loads(request.content).get("stream"):
            body = chunk_event("Hi") + chunk_event("", finish="stop") + DONE
            if own is not None:
                body = body.replace(b'"id"', b'"system_fingerprint":"%s","id"' % own.encode())
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json={**ANSWER, **fields})

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize("own", [None, "fp_engine"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_engines_own_is_kept_and_none_is_filled_in(own: str | None, stream: bool) -> None:
    engine = MockEngine(_engine_answer(own))
    async with asgi_client(create_app(gateway_settings(), transport=engine.transport)) as client:
        response = await client.post(CHAT, json=chat(stream=stream, max_tokens=4))
    assert response.status_code == 200
    if stream:
        events = [e.removeprefix("data: ") for e in sse_events(response.text)]
        prints = {json.loads(e)["system_fingerprint"] for e in events if e != "[DONE]"}
    else:
        prints = {response.json()["system_fingerprint"]}
    assert len(prints) == 1
    (value,) = prints
    assert value == own if own is not None else re.fullmatch(r"fp_[0-9a-f]{10}", value)


@pytest.mark.anyio
async def test_a_fan_outs_merged_answer_and_stream_carry_the_gateways() -> None:
    # n: fanout gives the route one merged engine answer; the route stamps it as any other.
    engine = MockEngine(_engine_answer(None))
    async with asgi_client(create_app(gateway_settings(), transport=engine.transport)) as client:
        whole = await client.post(CHAT, json=chat(n=2, max_tokens=4))
        streamed = await client.post(CHAT, json=chat(n=2, stream=True, max_tokens=4))
    assert whole.status_code == streamed.status_code == 200
    assert len(engine.requests) == 4
    answer = whole.json()
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    events = [e.removeprefix("data: ") for e in sse_events(streamed.text)]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    assert {c["choices"][0]["index"] for c in chunks if c["choices"]} == {0, 1}
    assert {c["system_fingerprint"] for c in chunks} == {answer["system_fingerprint"]}
    assert re.fullmatch(r"fp_[0-9a-f]{10}", answer["system_fingerprint"])
