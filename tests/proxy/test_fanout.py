"""``n`` served by fan-out, without HTTP: the seeds, the sub-request bodies, the merges
of answers and of streams. Through the app against a mocked engine:
test_fanout_http.py; streaming as it happens over real sockets:
test_fanout_streaming.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import UpstreamProtocolError
from gateway.proxy.fanout import derive_seed, fanout_bodies
from gateway.proxy.merge import StreamMerge, merge_answers, merge_usage
from tests.support.bodies import (
    DONE,
    MODEL,
    completion,
    sse,
    sse_events,
)
from tests.support.fuzzing import fuzz_settings
from tests.support.streamchunks import chunk, payloads, usage_chunk

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
