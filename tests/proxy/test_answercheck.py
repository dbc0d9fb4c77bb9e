"""A checked chat stream through the one relay loop, fed bytes without HTTP: the content
goes as it comes, the end is held until the check passes, a violation ends the stream
with the gateway's error event instead."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.observe.exchange import Exchange
from gateway.proxy.openai import CheckedChatStream
from gateway.proxy.relay import relay_stream
from gateway.schemas.expect import Answers, expectation
from tests.support.schemas import CHAT, formatted, person

pytestmark = pytest.mark.anyio


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def feed(*reads: bytes) -> AsyncIterator[bytes]:
    for read in reads:
        yield read


async def relayed(setting: str, *reads: bytes) -> tuple[list[bytes], Exchange]:
    asked = expectation(Answers(schema=setting), CHAT, formatted(person(n={"type": "integer"})))
    assert asked is not None
    record = Exchange("POST", CHAT, CHAT, "r")
    shaper = CheckedChatStream(asked, record, hide=False)
    out = [piece async for piece in relay_stream(feed(*reads), shaper, record=record)]
    return out, record


END = chunk({}, "stop") + b"data: [DONE]\n\n"


async def test_a_read_that_brings_content_and_the_end_lets_the_content_go_first() -> None:
    out, record = await relayed(
        "enforce", chunk({"content": '{"n": "x"'}) + chunk({"content": "}"}) + END
    )
    assert out[0] == chunk({"content": '{"n": "x"'}) + chunk({"content": "}"})
    error = json.loads(out[1].split(b"\n\n")[0][6:])["error"]
    assert (error["code"], error["param"]) == (
        "answer_violates_schema",
        "choices[0].message.content.n",
    )
    assert out[1].endswith(b"data: [DONE]\n\n") and b'"finish_reason"' not in out[1]
    assert record.error_code == "answer_violates_schema"


async def test_a_conforming_stream_ends_as_the_engine_ended_it() -> None:
    reads = (chunk({"content": '{"n": 1}'}), END)
    out, record = await relayed("enforce", *reads)
    assert b"".join(out) == b"".join(reads)
    assert record.answers == () and record.error_code is None


async def test_a_report_only_check_lets_the_end_go_and_records_it() -> None:
    reads = (chunk({"content": '{"n": "x"}'}), END)
    out, record = await relayed("report", *reads)
    assert b"".join(out) == b"".join(reads)
    assert [v.enforced for v in record.answers] == [False]
    assert record.report is not None and record.report.fields[0].detail == "answer_violates_schema"


async def test_a_stream_framed_otherwise_holds_the_whole_read_with_the_end() -> None:
    crlf = (chunk({"content": '{"n": 1}'}) + END).replace(b"\n", b"\r\n")
    out, _ = await relayed("enforce", crlf)
    assert b"".join(out) == crlf
