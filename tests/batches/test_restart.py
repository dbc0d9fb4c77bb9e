"""A gateway killed mid-batch (a real process, SIGKILL) and started again finishes the
batch: each line answered once in the files, no line with a recorded answer sent again,
only the lines in flight at the kill sent twice (the engine counts what it received)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

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
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread

pytestmark = pytest.mark.anyio
CHAT: Any = "/v1/chat/completions"
LINES, ANSWERED, CONCURRENCY = 40, 10, 4


async def test_a_gateway_killed_mid_batch_finishes_it_when_started_again(tmp_path: Path) -> None:
    engine = Received(create_engine())
    engine.limit = ANSWERED
    with ServerThread(engine) as server, contextlib.ExitStack() as stack:
        stack.callback(engine.release.set)  # a held request must not outlive the test
        settings = runner_config(server.url, CONCURRENCY, directory=str(tmp_path / "batches"))
        # Two workers: they share the store and its leases, and only one runs the batch.
        first_gateway = gateway_process(
            "--workers",
            "2",
            config=settings,
            tmp=tmp_path,
        )
        async with first_gateway as first:
            url, _ = await first.serving()
            client = sync_sdk(url)
            lines = [request(f"line-{i}", CHAT, chat_line_body(i)) for i in range(LINES)]
            file_id = await asyncio.to_thread(upload, client, jsonl(lines))
            batch = await asyncio.to_thread(
                client.batches.create,
                input_file_id=file_id,
                endpoint=CHAT,
                completion_window="24h",
            )

            def recorded() -> bool:
                counts = client.batches.retrieve(batch.id).request_counts
                return counts is not None and counts.completed == ANSWERED

            await until(recorded, f"{ANSWERED} lines recorded")
            await until(lambda: engine.held == CONCURRENCY, "the runner's lines in flight")
            os.killpg(first.process.pid, signal.SIGKILL)
            await first.process.wait()
            assert first.process.stdout is not None
            await first.process.stdout.read()  # to its end: the pipe is closed
        finished = set(engine.answered)
        in_flight = {i for i, n in engine.ids.items() if i not in engine.answered}
        engine.limit = None
        engine.release.set()
        async with gateway_process(
            config=settings,
            tmp=tmp_path,
        ) as second:
            url, _ = await second.serving()
            client = sync_sdk(url)
            done = await asyncio.to_thread(wait_for, client, batch.id)
            assert done.status == "completed"
            assert done.request_counts is not None
            assert (done.request_counts.completed, done.request_counts.failed) == (LINES, 0)
            out = await asyncio.to_thread(lines_of, client, done.output_file_id)
    assert sorted(out) == sorted(f"line-{i}" for i in range(LINES))
    ids = {engine_request_id(f"{batch.id}-{i + 1}".encode()).decode() for i in range(LINES)}
    assert set(engine.ids) == ids  # every line reached the engine
    assert len(finished) == ANSWERED and len(in_flight) == CONCURRENCY
    for request_id in finished:
        assert engine.ids[request_id] == 1  # a recorded answer is never asked for again
    twice = {i for i, n in engine.ids.items() if n > 1}
    assert twice <= in_flight  # only lines in flight at the kill were sent again
    assert all(n <= 2 for n in engine.ids.values())
