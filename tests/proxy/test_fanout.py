"""``n`` served by fan-out, without HTTP: the seeds, the sub-request bodies, the merges;
then through the app against a mocked engine (httpx.MockTransport via the factory).
Streaming as it happens over real sockets is in test_fanout_streaming.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.app.factory import create_app
from gateway.errors import UpstreamProtocolError
from gateway.proxy.fanout import derive_seed, fanout_bodies
from gateway.proxy.merge import StreamMerge, merge_answers, merge_usage
from gateway.settings import Settings
from tests.support.bodies import (
    CHAT,
    COMPLETIONS,
    DONE,
    MODEL,
    chat,
    completion,
    error_event,
    openai_error,
    sse,
    sse_events,
)
from tests.support.fuzzing import fuzz_settings
from tests.support.gateways import MockEngine, Recorder, asgi_client, gateway_settings
from tests.support.requestids import choice_id, choice_index, engine_id

INT64 = range(-(2**63), 2**63)

# (seed, index, derived): fixed for good, since a seeded request must give the same
# choices after an upgrade. Index 0 is the client's own seed.
SEEDS = [
    (1234, 0, 1234),
    (1234, 1, -4968325692281840421),
    (1234, 2, -7509856599009106652),
    (1234, 7, 9136733345333910430),
    (0, 1, -2152535657050944081),
    (1, 1, -7995527694508729151),
    (-1, 1, -1956407806741107680),
    (-1, 2, -1612297016619662647),
    (2**63 - 1, 1, 3055647633038352039),
    (-(2**63), 1, 5196802822362493915),
    (-(2**63), 7, -8818719466370675869),
]


@pytest.mark.parametrize(("seed", "index", "derived"), SEEDS)
def test_derive_seed_table(seed: int, index: int, derived: int) -> None:
    assert derive_seed(seed, index) == derived


def test_derived_seeds_are_splitmix64_outputs() -> None:
    # The first outputs of the reference splitmix64.c (Vigna) with its state at 0.
    reference = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
    assert [derive_seed(0, i) % 2**64 for i in (1, 2, 3, 4)] == reference


@pytest.mark.parametrize("seed", [0, 1, -1, 42, 1234, 2**62, 2**63 - 1, -(2**63)])
def test_derived_seeds_are_int64_and_distinct(seed: int) -> None:
    seeds = [derive_seed(seed, i) for i in range(8)]
    assert seeds[0] == seed
    assert all(s in INT64 for s in seeds)
    assert len(set(seeds)) == 8


def test_sub_request_bodies_get_a_seed_each() -> None:
    seeded = {"model": MODEL, "seed": 1234, "temperature": 1.0}
    bodies = [orjson.loads(b) for b in fanout_bodies(seeded, 3)]
    assert [b["seed"] for b in bodies] == [1234, derive_seed(1234, 1), derive_seed(1234, 2)]
    for body in bodies:
        assert {k: v for k, v in body.items() if k != "seed"} == {"model": MODEL, "temperature": 1}
    assert list(bodies[1]) == list(seeded)  # the seed keeps its place
    # Without a seed (or with null) every request goes without one: the engine draws its own.
    for body in ({"model": MODEL}, {"model": MODEL, "seed": None}):
        assert fanout_bodies(body, 3) == [orjson.dumps(body)] * 3


def test_usage_counts_the_prompt_once_and_sums_the_completions() -> None:
    usages = [
        {
            "prompt_tokens": 10,
            "completion_tokens": c,
            "total_tokens": 10 + c,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": c - 1, "note": "x"},
        }
        for c in (3, 5, 7)
    ]
    assert merge_usage(usages) == {
        "prompt_tokens": 10,
        "completion_tokens": 15,
        "total_tokens": 25,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 12, "note": "x"},
    }
    # A count missing from one answer would make any sum wrong: no usage at all.
    assert merge_usage([usages[0], None]) is None
    assert merge_usage([usages[0], {"prompt_tokens": 10, "completion_tokens": "5"}]) is None


def answer(content: str, *, id: str = "chatcmpl-1", usage: tuple[int, int] = (5, 2)) -> bytes:
    body = completion(content)
    body["id"] = id
    body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    body["usage"]["total_tokens"] = sum(usage)
    return orjson.dumps(body)


def test_json_answers_merge_into_one() -> None:
    merged = orjson.loads(
        merge_answers(
            [
                answer("a", id="first", usage=(5, 2)),
                answer("b", id="second", usage=(5, 3)),
                answer("c", id="third", usage=(5, 4)),
            ]
        )
    )
    assert merged["id"] == "first"
    assert [c["index"] for c in merged["choices"]] == [0, 1, 2]
    assert [c["message"]["content"] for c in merged["choices"]] == ["a", "b", "c"]
    assert merged["usage"] == {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    assert list(merged) == ["id", "object", "created", "model", "choices", "usage"]


def test_answers_with_several_choices_are_numbered_in_order() -> None:
    two = completion("a")
    two["choices"].append({**two["choices"][0], "index": 1})
    merged = orjson.loads(merge_answers([orjson.dumps(two), answer("b")]))
    assert [c["index"] for c in merged["choices"]] == [0, 1, 2]


@pytest.mark.parametrize(
    "bad",
    [b'{"id": "x", "choi', b'["not", "an", "object"]', b'{"id": "x"}', b'{"choices": [1]}'],
)
def test_an_unusable_answer_is_a_protocol_error(bad: bytes) -> None:
    with pytest.raises(UpstreamProtocolError):
        merge_answers([answer("a"), bad])


def chunk(
    index: int = 0, *, id: str = "c", text: str = "t", finish: str | None = None, **more: Any
) -> dict[str, Any]:
    choice = {"index": index, "delta": {"content": text}, "finish_reason": finish}
    return {"id": id, "object": "chat.completion.chunk", "created": 1, "choices": [choice], **more}


def usage_chunk(id: str, completion_tokens: int) -> dict[str, Any]:
    usage = {"prompt_tokens": 5, "completion_tokens": completion_tokens}
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 2,
        "choices": [],
        "usage": usage,
    }


def payloads(data: bytes) -> list[Any]:
    return [
        e.removeprefix("data: ") if e == "data: [DONE]" else json.loads(e.removeprefix("data: "))
        for e in sse_events(data)
    ]


@fuzz_settings(200)
@given(
    n=st.integers(2, 5),
    lengths=st.lists(st.integers(1, 4), min_size=5, max_size=5),
    usage=st.booleans(),
    order=st.randoms(use_true_random=False),
)
def test_merged_stream_has_every_index_once_per_stream_and_one_end(
    n: int, lengths: list[int], usage: bool, order: Any
) -> None:
    """Whatever the interleaving: each stream's chunks keep their order under its own
    index, one id throughout, one usage chunk at the end when asked, one [DONE]."""
    streams = [
        [sse(chunk(id=f"s{i}", text=f"{i}.{k}")) for k in range(lengths[i])]
        + ([sse(usage_chunk(f"s{i}", lengths[i]))] if usage else [])
        + [DONE]
        for i in range(n)
    ]
    merge = StreamMerge(n, include_usage=usage)
    out = b""
    positions = [0] * n
    while live := [i for i in range(n) if positions[i] < len(streams[i])]:
        i = order.choice(live)
        out += merge.rewrite(i, streams[i][positions[i]])
        positions[i] += 1
    out += merge.end()
    events = payloads(out)
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    if usage:
        *chunks, last = chunks
        assert last["choices"] == [] and last["id"] == chunks[0]["id"]
        assert last["usage"] == {
            "prompt_tokens": 5,
            "completion_tokens": sum(lengths[:n]),
            "total_tokens": 5 + sum(lengths[:n]),
        }
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    for i in range(n):
        texts = [
            c["choices"][0]["delta"]["content"] for c in chunks if c["choices"][0]["index"] == i
        ]
        assert texts == [f"{i}.{k}" for k in range(lengths[i])]
    assert all(len(c["choices"]) == 1 and c["choices"][0]["index"] < n for c in chunks)


def test_stream_events_in_other_framings_are_rewritten() -> None:
    merge = StreamMerge(2, include_usage=False)
    crlf = b"data: " + orjson.dumps(chunk(0, id="x")) + b"\r\n\r\n"
    two_lines = b"event: message\ndata: " + orjson.dumps(chunk(0, id="y")) + b"\n\n"
    comment = b": keep-alive\n\n"
    out = merge.rewrite(1, crlf) + merge.rewrite(0, comment + two_lines)
    assert out.count(b"\n\n") == 3
    events = sse_events(out)
    assert events[1] == ": keep-alive"
    first, second = (json.loads(e.removeprefix("data: ")) for e in (events[0], events[2]))
    assert (first["choices"][0]["index"], second["choices"][0]["index"]) == (1, 0)
    assert second["id"] == "x"


def test_a_stream_with_several_choices_keeps_them_apart() -> None:
    # An engine that answered with two choices although n was taken out: numbered past n.
    merge = StreamMerge(2, include_usage=False)
    two = {**chunk(0), "choices": [chunk(0)["choices"][0], chunk(1)["choices"][0]]}
    out = merge.rewrite(0, sse(two)) + merge.rewrite(1, sse(chunk(0))) + merge.rewrite(0, sse(two))
    indices = [[c["index"] for c in e["choices"]] for e in payloads(out)]
    assert indices == [[0, 2], [1], [0, 2]]


def test_no_usage_chunk_unless_every_stream_sent_one() -> None:
    merge = StreamMerge(2, include_usage=True)
    merge.rewrite(0, sse(chunk(0)) + sse(usage_chunk("c", 3)) + DONE)
    merge.rewrite(1, sse(chunk(0)) + DONE)
    assert merge.end() == DONE  # a usage without stream 1's completion would be wrong


@pytest.fixture
def settings() -> Settings:
    return gateway_settings(
        environ={
            "FT_GATEWAY_LIMITS__MAX_STREAM_BYTES": "4096",
            "FT_GATEWAY_LIMITS__MAX_RESPONSE_BYTES": "4096",
        }
    )


@pytest.fixture
async def client(
    settings: Settings, engine: MockEngine, recorder: Recorder
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, transport=engine.transport)
    app.state.gateway.observer = recorder
    async with asgi_client(app) as c:
        c.headers["x-request-id"] = "fan"  # what sub_index tells the choices apart by
        yield c


def sub_index(request: httpx.Request) -> int:
    """Which choice an engine request is for, by the UUID the gateway derives for choice i
    from the client's request id (which the request carries as X-Client-Request-ID)."""
    sent = request.headers["x-request-id"].encode()
    return choice_index(sent, request.headers["x-client-request-id"])


def by_choice(engine: MockEngine) -> dict[int, dict[str, Any]]:
    return {sub_index(r): json.loads(r.content) for r in engine.requests}


@pytest.mark.anyio
@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
async def test_n_gets_n_engine_requests_merged_into_one_answer(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, route: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        i = sub_index(request)
        if route == COMPLETIONS:
            choice = {"index": 0, "text": f"text {i}", "logprobs": None, "finish_reason": "stop"}
            body = {"id": f"cmpl-{i}", "object": "text_completion", "created": 7, "model": MODEL}
            body |= {"choices": [choice]}
        else:
            body = completion(f"text {i}")
            body["id"] = f"chatcmpl-{i}"
            body["system_fingerprint"] = f"fp-{i}"
        usage = {"prompt_tokens": 11, "completion_tokens": i + 1, "total_tokens": 12 + i}
        headers = {"retry-after": str(i + 1), "x-engine": f"replica-{i}"}
        return httpx.Response(200, json={**body, "usage": usage}, headers=headers)

    engine.handler = handler
    request = chat(n=3, seed=1234) if route == CHAT else {"model": MODEL, "prompt": "p", "n": 3}
    response = await client.post(route, json=request, headers={"x-request-id": "req-7"})
    assert response.status_code == 200
    merged = response.json()
    assert response.headers["x-request-id"] == "req-7"
    assert response.headers["retry-after"] == "1"  # the first answer's (relayed) headers
    assert "x-engine" not in response.headers  # an engine's own: never relayed
    prefix = "chatcmpl" if route == CHAT else "cmpl"
    assert merged["id"] == f"{prefix}-0"
    assert [c["index"] for c in merged["choices"]] == [0, 1, 2]
    choices = merged["choices"]
    texts = [c["text"] if route == COMPLETIONS else c["message"]["content"] for c in choices]
    assert texts == ["text 0", "text 1", "text 2"]
    assert merged["usage"] == {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}
    if route == CHAT:
        assert merged["system_fingerprint"] == "fp-0"

    sent_ids = sorted(r.headers["x-request-id"].encode() for r in engine.requests)
    assert sent_ids == sorted(choice_id(engine_id("req-7"), i) for i in range(3))
    assert {r.headers["x-client-request-id"] for r in engine.requests} == {"req-7"}
    sent = by_choice(engine)
    assert all("n" not in body for body in sent.values())
    if route == CHAT:
        assert [sent[i]["seed"] for i in range(3)] == [derive_seed(1234, i) for i in range(3)]
    else:
        assert all("seed" not in body for body in sent.values())
    (exchange,) = recorder.finished_exchanges
    assert exchange.upstream_status == 200 and exchange.status == 200
    assert [(o.field, o.action) for o in exchange.outcomes] == [("n", "fanout")]


@pytest.mark.anyio
async def test_n_one_is_a_single_request_with_n(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    response = await client.post(CHAT, json=chat(n=1), headers={"x-request-id": "one"})
    assert len(response.json()["choices"]) == 1
    (request,) = engine.requests
    assert request.headers["x-request-id"] == engine_id("one")
    assert json.loads(request.content)["n"] == 1


SSE = "text/event-stream"


def failing(bad: int, status: int, body: Any, *, stream: bool = False) -> Any:
    """An engine's handler under which choice ``bad`` fails with ``status`` and ``body``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == bad:
            if isinstance(body, bytes):
                return httpx.Response(status, content=body, headers={"content-type": "text/html"})
            return httpx.Response(status, json=body)
        if stream:
            events = sse(chunk()) + DONE
            return httpx.Response(200, content=events, headers={"content-type": SSE})
        return httpx.Response(200, json=completion("fine"))

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_engine_500_in_one_is_that_status_and_nothing_merged(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, stream: bool
) -> None:
    engine.handler = failing(1, 500, b"<html>Traceback /srv/engine.py</html>", stream=stream)
    response = await client.post(CHAT, json=chat(n=3, stream=stream))
    openai_error(response, 500, code="upstream_error", type="upstream_error")
    assert "fine" not in response.text and "Traceback" not in response.text
    assert recorder.finished_exchanges[-1].upstream_status == 500


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_engine_400_in_one_is_that_400(
    client: httpx.AsyncClient, engine: MockEngine, stream: bool
) -> None:
    vllm = {"error": {"message": "prompt too long", "type": "BadRequestError", "code": 400}}
    engine.handler = failing(2, 400, vllm, stream=stream)
    response = await client.post(CHAT, json=chat(n=3, stream=stream))
    openai_error(response, 400, message="prompt too long", code=None)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
    ],
)
async def test_a_failed_engine_request_is_its_error_status(
    client: httpx.AsyncClient, engine: MockEngine, exc: Exception, status: int, code: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == 0:
            raise exc
        return httpx.Response(200, json=completion())

    engine.handler = handler
    openai_error(await client.post(CHAT, json=chat(n=2)), status, code=code)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad",
    [b'{"id": "chatcmpl-1", "choi', b'{"id": "chatcmpl-1", "object": "chat.completion"}'],
)
async def test_a_malformed_answer_in_one_is_a_502(
    client: httpx.AsyncClient, engine: MockEngine, bad: bytes
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if sub_index(request) == 1:
            return httpx.Response(200, content=bad, headers={"content-type": "application/json"})
        return httpx.Response(200, json=completion())

    engine.handler = handler
    openai_error(await client.post(CHAT, json=chat(n=3)), 502, code="upstream_protocol_error")


@pytest.mark.anyio
async def test_an_answer_past_the_size_limit_in_one_is_a_502(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=completion("x" * 5000 if sub_index(request) else "ok"))

    engine.handler = handler
    response = await client.post(CHAT, json=chat(n=2))
    error = openai_error(response, 502, code="upstream_protocol_error")
    assert "larger than the gateway's limit" in error["message"]


def streaming(events: dict[int, bytes]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        body = events[sub_index(request)]
        return httpx.Response(200, content=body, headers={"content-type": SSE})

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize("include_usage", [True, False])
async def test_merged_stream_ends_once_with_usage_only_when_asked(
    client: httpx.AsyncClient, engine: MockEngine, include_usage: bool
) -> None:
    def stream(i: int) -> bytes:
        chunks = [sse(chunk(id=f"c{i}", text=f"{i}")), sse(chunk(id=f"c{i}", finish="stop"))]
        if include_usage:
            chunks.append(sse(usage_chunk(f"c{i}", i + 1)))
        return b"".join(chunks) + DONE

    engine.handler = streaming({i: stream(i) for i in range(3)})
    body = chat(n=3, stream=True)
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    response = await client.post(CHAT, json=body)
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    events = payloads(response.content)
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    usage_chunks = [c for c in chunks if c["choices"] == []]
    if include_usage:
        assert usage_chunks == [chunks[-1]]
        assert chunks[-1]["usage"] == {
            "prompt_tokens": 5,
            "completion_tokens": 6,
            "total_tokens": 11,
        }
    else:
        assert usage_chunks == []
    assert len({c["id"] for c in chunks}) == 1
    assert sorted(c["choices"][0]["index"] for c in chunks if c["choices"]) == [0, 0, 1, 1, 2, 2]
    assert all("usage" not in c for c in chunks if c["choices"])
    sent = [json.loads(r.content) for r in engine.requests]
    assert all(b["stream_options"] == body.get("stream_options") for b in sent if include_usage)


BROKEN_STREAMS = [
    # (what choice 1's stream does, the error event's code)
    (sse(chunk()) + b"data: {not json\n\n" + DONE, "upstream_protocol_error"),
    (sse(chunk()), "upstream_protocol_error"),  # ends without [DONE]
    (sse(chunk()) + sse({"error": {"message": "oom", "code": 500}}), "upstream_error"),
    (sse(chunk(text="x" * 5000)) + DONE, "upstream_protocol_error"),  # past the limit
]


@pytest.mark.anyio
@pytest.mark.parametrize(("broken", "code"), BROKEN_STREAMS)
async def test_one_broken_stream_ends_the_answer_with_one_error_event(
    client: httpx.AsyncClient, engine: MockEngine, recorder: Recorder, broken: bytes, code: str
) -> None:
    fine = sse(chunk(text="y" * 1000)) + DONE
    engine.handler = streaming({0: fine, 1: broken, 2: fine})
    response = await client.post(CHAT, json=chat(n=3, stream=True))
    assert response.status_code == 200
    assert error_event(response.text)["code"] == code
    assert response.text.count("data: [DONE]") == 1
    assert recorder.finished_exchanges[-1].error_code == code


@pytest.mark.anyio
async def test_the_size_limit_counts_all_n_streams(
    client: httpx.AsyncClient, engine: MockEngine
) -> None:
    # Each stream alone is within the 4096 bytes of the settings; the three are not.
    engine.handler = streaming({i: sse(chunk(text="z" * 1500)) + DONE for i in range(3)})
    response = await client.post(CHAT, json=chat(n=3, stream=True))
    assert "larger than the limit" in error_event(response.text)["message"]
