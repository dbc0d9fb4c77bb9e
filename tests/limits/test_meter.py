"""Token metering: usage read from answers and streams; what include_usage adds removed
from a stream byte for byte when the client did not ask for it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gateway.limits.meter import StreamMeter, Usage, answer_usage, total_usage, usage_of
from tests.support.bodies import CHAT, chat, without_fingerprint
from tests.support.gateways import gateway_settings, serve_gateway
from tests.support.meteredengine import MeteredEngine
from tests.support.servers import running_server

USAGE = b'{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}'
LAST = b'data: {"id":"x","choices":[],"usage":' + USAGE + b"}\n\n"
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, Usage(1, 2, 3)),
        ({"prompt_tokens": 1, "completion_tokens": 2}, Usage(1, 2, 3)),
        ({"prompt_tokens": 1, "completion_tokens": "2"}, None),
        ({"prompt_tokens": True, "completion_tokens": 2}, None),
        (None, None),
        ([], None),
    ],
)
def test_usage_of(value: object, expected: Usage | None) -> None:
    assert usage_of(value) == expected


def test_answer_usage_and_sums() -> None:
    assert answer_usage(b'{"choices":[],"usage":' + USAGE + b"}") == Usage(3, 4, 7)
    assert answer_usage(b'{"choices":[]}') is None
    assert answer_usage(b'{"usage": nope') is None
    assert answer_usage(b'["usage"]') is None
    assert total_usage([Usage(1, 2, 3), Usage(1, 5, 6)]) == Usage(2, 7, 9)
    assert total_usage([Usage(1, 2, 3), None]) is None
    assert total_usage([]) is None


@pytest.mark.parametrize(
    ("events", "shown"),
    [
        # The null on every chunk is cut out wherever it stands in the object.
        (
            b'data: {"id":"x","choices":[{"i":1}],"usage":null}\n\n',
            b'data: {"id":"x","choices":[{"i":1}]}\n\n',
        ),
        (b'data: {"usage":null,"id":"x"}\n\n', b'data: {"id":"x"}\n\n'),
        (b'data: {"id": "x", "usage": null}\n\n', b'data: {"id": "x"}\n\n'),
        # The usage chunk is dropped; events around it in one block stay.
        (LAST + DONE, DONE),
        (b'data: {"id":"x","usage":null}\n\n' + LAST + DONE, b'data: {"id":"x"}\n\n' + DONE),
        # Usage on a chunk that has choices: the usage goes, the chunk stays.
        (
            b'data: {"choices":[{"i":1}],"usage":' + USAGE + b"}\n\n",
            b'data: {"choices":[{"i":1}]}\n\n',
        ),
        (b"data: [DONE]\n\n", b"data: [DONE]\n\n"),
        # Two chunks in one block: each one's null goes.
        (
            b'data: {"id":"x","usage":null}\n\ndata: {"id":"y","usage":null}\n\n',
            b'data: {"id":"x"}\n\ndata: {"id":"y"}\n\n',
        ),
    ],
)
def test_hidden_usage_is_removed(events: bytes, shown: bytes) -> None:
    meter = StreamMeter(hide=True)
    assert meter.feed(events) == shown


def test_the_usage_is_read_whether_hidden_or_not() -> None:
    for hide in (True, False):
        meter = StreamMeter(hide=hide)
        out = meter.feed(b'data: {"id":"x","usage":null}\n\n') + meter.feed(LAST + DONE)
        assert meter.usage == Usage(3, 4, 7)
        if not hide:
            assert out == b'data: {"id":"x","usage":null}\n\n' + LAST + DONE


def test_events_in_crlf_or_several_lines_are_read_and_passed_unchanged() -> None:
    meter = StreamMeter(hide=False)
    block = LAST.replace(b"\n", b"\r\n")
    assert meter.feed(block) == block
    assert meter.usage == Usage(3, 4, 7)
    meter = StreamMeter(hide=True)
    event = b'event: x\ndata: {"choices":[],"usage":' + USAGE + b"}\n\n"
    assert meter.feed(event) == event  # not the one-line shape: left as sent
    assert meter.usage == Usage(3, 4, 7)
    assert meter.feed(b'data: {not json, "usage"}\n\n') == b'data: {not json, "usage"}\n\n'


@pytest.mark.anyio
@pytest.mark.parametrize("route", ["chat", "completions"])
async def test_a_metered_stream_is_byte_for_byte_the_engines_direct_stream(
    route: str, tmp_path: Path
) -> None:
    engine = MeteredEngine()
    if route == "chat":
        path, body = CHAT, chat(stream=True, max_tokens=6)
    else:
        path, body = (
            "/v1/completions",
            {"model": "m", "prompt": "a b", "stream": True, "max_tokens": 6},
        )
    async with running_server(engine) as engine_url:
        async with httpx.AsyncClient(base_url=engine_url) as direct:
            expected = (await direct.post(path, json=body)).content
        async with (
            serve_gateway(gateway_settings(engine_url)) as gw,
            httpx.AsyncClient(base_url=gw.url) as client,
        ):
            got = (await client.post(path, json=body)).content
            exchange = gw.recorder.finished_exchanges[-1]
    # The engine's stream, each chunk with the gateway's system_fingerprint (it sends none).
    assert without_fingerprint(got) == expected
    assert b"usage" not in got
    # ... though the engine was asked for usage, and the gateway metered it.
    assert engine.bodies[-1]["stream_options"] == {"include_usage": True}
    assert exchange.usage is not None and exchange.usage.completion == 6


@pytest.mark.anyio
async def test_with_stream_usage_off_the_request_goes_unchanged(tmp_path: Path) -> None:
    engine = MeteredEngine()
    settings = gateway_settings(overrides={("metering", "stream_usage"): False})
    async with running_server(engine) as engine_url:
        settings.upstream.url = engine_url
        async with serve_gateway(settings) as gw, httpx.AsyncClient(base_url=gw.url) as client:
            await client.post(CHAT, json=chat(stream=True, max_tokens=2))
            exchange = gw.recorder.finished_exchanges[-1]
    assert "stream_options" not in engine.bodies[-1]
    assert exchange.usage is None


@pytest.mark.anyio
async def test_a_fanned_out_stream_shows_usage_only_when_asked(tmp_path: Path) -> None:
    engine = MeteredEngine()
    async with running_server(engine) as engine_url:
        async with (
            serve_gateway(gateway_settings(engine_url)) as gw,
            httpx.AsyncClient(base_url=gw.url) as client,
        ):
            plain = (await client.post(CHAT, json=chat(n=2, stream=True, max_tokens=3))).content
            unasked = gw.recorder.finished_exchanges[-1].usage
            body = chat(n=2, stream=True, max_tokens=3, stream_options={"include_usage": True})
            asked = (await client.post(CHAT, json=body)).content
    assert b"usage" not in plain and plain.endswith(b"data: [DONE]\n\n")
    assert unasked == Usage(4, 6, 10)  # both engine requests: the prompt read twice
    assert b'"usage":{"prompt_tokens":2,"completion_tokens":6,"total_tokens":8}' in asked
