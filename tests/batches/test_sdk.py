"""The Batch API with the openai SDK -> the gateway -> the reference engine, over
loopback: batches of chat and embeddings requests run and answer as the same requests
one by one, a refused line comes back with its 400, a malformed file fails naming its
lines, and files and batches are their key's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.batches import jsonl, lines_of, request, same_answer, upload, wait_for
from tests.support.sdk import sync_sdk
from tests.support.vectors import EMBEDDING_MODEL, engine, gateway

CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
MODEL = "Qwen3.8-Flash-Next"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with engine() as (engine_url, _), gateway(engine_url, batches__poll_seconds=0.2) as url:
        yield url


def chat_body(i: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"Tell me about the old town, part {i}."}],
        "max_tokens": 8,
        "seed": i,
    }


def embeddings_body(i: int) -> dict[str, Any]:
    return {
        "model": EMBEDDING_MODEL,
        "input": [f"Sentence {i} is about the weather.", f"And {i} more."],
        "encoding_format": "float",
    }


def run_batch(client: openai.OpenAI, url: Any, lines: list[dict[str, Any]]) -> Any:
    file_id = upload(client, jsonl(lines))
    batch = client.batches.create(input_file_id=file_id, endpoint=url, completion_window="24h")
    assert batch.status == "validating"
    return wait_for(client, batch.id)


def check_batch_answers_as_one_by_one(url: str, count: int, path: str, make: Any) -> None:
    client = sync_sdk(url)
    lines = [request(f"line-{i}", path, make(i)) for i in range(count)]
    batch = run_batch(client, path, lines)
    assert batch.status == "completed", batch.errors
    assert batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed) == (count, count)
    assert batch.error_file_id is None
    out = lines_of(client, batch.output_file_id)
    assert sorted(out) == sorted(f"line-{i}" for i in range(count))
    http = client.with_raw_response
    for i in range(0, count, max(1, count // 25)):
        row = out[f"line-{i}"]
        assert row["error"] is None and row["response"]["status_code"] == 200
        alone = (
            http.chat.completions.create(**make(i))
            if path == CHAT
            else http.embeddings.create(**make(i))
        )
        assert same_answer(row["response"]["body"], alone.http_response.json())
        assert row["response"]["request_id"] == f"{batch.id}-{i + 1}"


# 1,000 lines each: about 5 s apiece on two loaded cores (the reference engine is fast).
def test_a_thousand_line_chat_batch_answers_as_the_same_requests_one_by_one(url: str) -> None:
    check_batch_answers_as_one_by_one(url, 1000, CHAT, chat_body)


def test_a_thousand_line_embeddings_batch_answers_as_one_by_one(url: str) -> None:
    check_batch_answers_as_one_by_one(url, 1000, EMBEDDINGS, embeddings_body)


def test_a_line_the_policy_refuses_is_in_the_error_file_with_its_400(url: str) -> None:
    client = sync_sdk(url)
    refused = {**chat_body(1), "logprobs": True}
    batch = run_batch(
        client, CHAT, [request("fine", CHAT, chat_body(0)), request("refused", CHAT, refused)]
    )
    assert batch.status == "completed"
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    errors = lines_of(client, batch.error_file_id)
    assert list(errors) == ["refused"]
    with pytest.raises(openai.BadRequestError) as live:
        client.chat.completions.create(**refused)
    response = errors["refused"]["response"]
    assert response["status_code"] == 400
    assert response["body"] == live.value.response.json()
    assert list(lines_of(client, batch.output_file_id)) == ["fine"]


def test_a_malformed_file_fails_validation_naming_its_lines(url: str) -> None:
    client = sync_sdk(url)
    good = request("a", CHAT, chat_body(0))
    lines: list[Any] = [
        good,
        "{not json",
        {**good, "custom_id": "b", "method": "GET"},
        {**good, "custom_id": "c", "url": EMBEDDINGS},
        {**good},  # custom_id "a" again
        {"method": "POST", "url": CHAT, "body": chat_body(1)},
        {**good, "custom_id": "d", "body": "text"},
    ]
    batch = run_batch(client, CHAT, lines)
    assert batch.status == "failed" and batch.failed_at is not None
    assert batch.errors is not None and batch.errors.data is not None
    found = [(e.line, e.code, e.param) for e in batch.errors.data]
    assert found == [
        (2, "invalid_json_line", None),
        (3, "invalid_method", "method"),
        (4, "url_mismatch", "url"),
        (5, "duplicate_custom_id", "custom_id"),
        (6, "missing_required_parameter", "custom_id"),
        (7, "invalid_type", "body"),
    ]
    assert batch.output_file_id is None and batch.error_file_id is None
