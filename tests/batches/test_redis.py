"""Batches in Redis: the Batch API over the Redis store, and two gateways (real processes)
on one Redis: one runs a batch, the other takes it over when the first dies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis

from gateway.proxy.headers import engine_request_id
from refengine import create_app as create_engine
from tests.support.batches import (
    Received,
    chat_line_body,
    jsonl,
    lines_of,
    request,
    runner_config,
    until,
    upload,
    wait_for,
)
from tests.support.processes import gateway_process
from tests.support.redisserver import RedisServer
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread
from tests.support.vectors import engine, gateway

CHAT: Any = "/v1/chat/completions"
PREFIX = "ft-gateway:batch:"
LINES, ANSWERED, CONCURRENCY = 30, 8, 3


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    flags: dict[str, Any] = {
        "batches__backend": "redis",
        "batches__url": redis_server.url,
        "batches__poll_seconds": 0.2,
    }
    with engine() as (engine_url, _), gateway(engine_url, **flags) as url:
        yield url


def test_files_and_batches_in_redis_are_their_keys_own(url: str) -> None:
    client = sync_sdk(url)
    content = jsonl([request(f"r{i}", CHAT, chat_line_body(i)) for i in range(5)])
    file_id = upload(client, content)
    assert client.files.retrieve(file_id).bytes == len(content)
    assert client.files.content(file_id).content == content
    assert [f.id for f in client.files.list(purpose="batch")] == [file_id]
    batch = client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    done = wait_for(client, batch.id)
    assert done.status == "completed"
    assert sorted(lines_of(client, done.output_file_id)) == [f"r{i}" for i in range(5)]
    assert [b.id for b in client.batches.list()] == [batch.id]
    other = sync_sdk(url, api_key="sk-other")
    with pytest.raises(openai.NotFoundError):
        other.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        other.files.content(file_id)
    assert client.files.delete(file_id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(file_id)


@pytest.mark.anyio
async def test_of_two_gateways_on_one_redis_one_runs_a_batch_and_the_other_takes_over(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    store = redis.Redis.from_url(redis_server.url)
    engine = Received(create_engine())
    engine.limit = ANSWERED
    settings = runner_config("", CONCURRENCY, backend="redis", url=redis_server.url)
    with ServerThread(engine) as server, contextlib.ExitStack() as stack:
        stack.callback(engine.release.set)  # a held request must not outlive the test
        settings["upstream"]["url"] = server.url
        async with (
            gateway_process("--workers", "1", config=settings, tmp=tmp_path) as a,
            gateway_process("--workers", "1", config=settings, tmp=tmp_path) as b,
        ):
            (url_a, _), (url_b, _) = await a.serving(), await b.serving()
            client = sync_sdk(url_a)
            lines = [request(f"line-{i}", CHAT, chat_line_body(i)) for i in range(LINES)]
            file_id = await asyncio.to_thread(upload, client, jsonl(lines))
            batch = await asyncio.to_thread(
                client.batches.create, input_file_id=file_id, endpoint=CHAT, completion_window="24h"
            )

            def recorded() -> bool:
                counts = client.batches.retrieve(batch.id).request_counts
                return counts is not None and counts.completed == ANSWERED

            await until(recorded, f"{ANSWERED} lines recorded")
            await until(lambda: engine.held == CONCURRENCY, "the runner's lines in flight")
            holder = store.get(PREFIX + f"lease:{batch.id}")
            assert holder is not None
            pid = int((holder.decode() if isinstance(holder, bytes) else holder).split(":")[1])
            running, other = (a, url_b) if pid == a.process.pid else (b, url_a)
            assert pid == running.process.pid  # one of the two, and only one, holds it
            assert engine.held == CONCURRENCY  # the other sends nothing meanwhile
            os.killpg(running.process.pid, signal.SIGKILL)
            await running.process.wait()
            assert running.process.stdout is not None
            await running.process.stdout.read()
            finished = set(engine.answered)
            in_flight = {i for i in engine.ids if i not in engine.answered}
            engine.limit = None
            engine.release.set()
            survivor = sync_sdk(other)
            done = await asyncio.to_thread(wait_for, survivor, batch.id)
            assert done.status == "completed"
            out = await asyncio.to_thread(lines_of, survivor, done.output_file_id)
    store.close()
    assert sorted(out) == sorted(f"line-{i}" for i in range(LINES))
    ids = {engine_request_id(f"{batch.id}-{i + 1}".encode()).decode() for i in range(LINES)}
    assert set(engine.ids) == ids
    assert all(engine.ids[i] == 1 for i in finished)
    assert {i for i, n in engine.ids.items() if n > 1} <= in_flight
