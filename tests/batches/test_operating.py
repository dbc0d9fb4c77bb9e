"""Operating the Batch API: its metrics, ``ft-gateway batches`` list and cancel, a store
that fails (a full disk) without a batch lost, and the API's errors."""

from __future__ import annotations

import contextlib
import errno
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from gateway.app.factory import create_app
from gateway.batches.store import BatchStore, FileRecord
from gateway.cli import main
from gateway.errors import StoreUnavailable
from refengine import create_app as create_engine
from tests.support.batches import DEADLINE, Received, jsonl, lines_of, request, upload, wait_for
from tests.support.gateways import gateway_settings
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread

CHAT: Any = "/v1/chat/completions"
NOPE: Any = "/v1/nope"
HOUR: Any = "1h"


def body(i: int) -> dict[str, Any]:
    return {
        "model": "Qwen3.8-Flash-Next",
        "messages": [{"role": "user", "content": f"Line {i}."}],
        "max_tokens": 4,
    }


class FullDisk:
    """A store whose writes fail like a full disk's, the first ``failures[name]`` times."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store
        self.failures: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.runner: Any = None  # the gateway's runner (set by the fixture)

    def _fail(self, name: str) -> None:
        if self.failures.get(name, 0) > self.failed.get(name, 0):
            self.failed[name] = self.failed.get(name, 0) + 1
            raise StoreUnavailable(
                f"The batch store failed: {OSError(errno.ENOSPC, 'No space left on device')}."
            )

    async def put_file(self, record: FileRecord, content: bytes) -> None:
        self._fail("output" if record.purpose == "batch_output" else "upload")
        await self.store.put_file(record, content)

    async def record(
        self, batch_id: str, holder: str, line: int, failed: bool, data: bytes
    ) -> bool:
        self._fail("record")
        return await self.store.record(batch_id, holder, line, failed, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[tuple[str, Received, FullDisk, Path]]:
    engine = Received(create_engine())
    with ServerThread(engine) as server, contextlib.ExitStack() as stack:
        stack.callback(engine.release.set)
        overrides: dict[tuple[str, ...], Any] = {
            ("batches", "directory"): str(tmp_path / "b"),
            ("batches", "poll_seconds"): 0.1,
            ("batches", "retry_seconds"): 0.05,
            ("batches", "concurrency"): 2,
        }
        app = create_app(gateway_settings(server.url, overrides=overrides))
        service = app.state.batches
        disk = FullDisk(service.store)
        service.api.store = service.runner.store = disk
        disk.runner = service.runner
        config = tmp_path / "config.yaml"
        config.write_text(json.dumps({"batches": {"directory": str(tmp_path / "b")}}))
        with ServerThread(app) as gateway:
            yield gateway.url, engine, disk, config


def create(client: openai.OpenAI, lines: int) -> str:
    file_id = upload(client, jsonl([request(f"l{i}", CHAT, body(i)) for i in range(lines)]))
    return client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h").id


def test_a_full_disk_refuses_an_upload_with_a_503_and_keeps_nothing(
    chain: tuple[str, Received, FullDisk, Path],
) -> None:
    url, _, disk, _ = chain
    disk.failures["upload"] = 1
    client = sync_sdk(url)
    with pytest.raises(openai.InternalServerError) as failed:
        upload(client, jsonl([request("a", CHAT, body(0))]))
    assert failed.value.status_code == 503
    error = failed.value.response.json()["error"]
    assert error["code"] == "store_unavailable" and "No space left" in error["message"]
    assert list(client.files.list()) == []


def test_a_batch_whose_store_fails_pauses_and_finishes_every_line_once(
    chain: tuple[str, Received, FullDisk, Path],
) -> None:
    url, engine, disk, _ = chain
    disk.failures |= {"record": 5, "output": 2}
    client = sync_sdk(url)
    batch = wait_for(client, create(client, 12))
    assert disk.failed == {"record": 5, "output": 2}  # it met the full disk, and went on
    assert batch.status == "completed"
    assert batch.request_counts is not None and batch.request_counts.completed == 12
    assert sorted(lines_of(client, batch.output_file_id)) == sorted(f"l{i}" for i in range(12))
    assert sum(engine.ids.values()) == 12  # an answer kept late was not asked for again


def test_metrics_show_batches_and_their_lines(
    chain: tuple[str, Received, FullDisk, Path],
) -> None:
    url, _, _, _ = chain
    client = sync_sdk(url)
    assert wait_for(client, create(client, 3)).status == "completed"
    text = httpx.get(f"{url}/metrics").text
    assert 'ft_gateway_batch_lines_total{outcome="completed"} 3.0' in text
    assert 'ft_gateway_batches_finished_total{status="completed"} 1.0' in text
    assert 'ft_gateway_batch_concurrency{deployment=""} 2.0' in text


def test_the_command_lists_and_cancels_a_running_batch(
    chain: tuple[str, Received, FullDisk, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, engine, disk, config = chain
    engine.limit = 2  # two lines answered, then the engine holds the rest
    client = sync_sdk(url)
    batch_id = create(client, 10)
    wait_for(client, batch_id, ("in_progress",))
    assert main(["batches", "--config", str(config), "--status", "in_progress"]) == 0
    assert batch_id in capsys.readouterr().out
    assert main(["batches", "--config", str(config), "--cancel", batch_id]) == 0
    assert capsys.readouterr().out.strip() == f"{batch_id}: cancelling"
    # The engine lets the held lines go only once the runner has seen the cancel
    # (its next poll of the store): released before, on a loaded machine, it
    # could send every line first and leave none unsent.
    deadline = time.monotonic() + DEADLINE
    while disk.runner.stopping.get(batch_id) != "cancelling":
        assert time.monotonic() < deadline, "the runner never saw the cancel"
        time.sleep(0.02)
    engine.release.set()
    batch = wait_for(client, batch_id)
    assert batch.status == "cancelled" and batch.cancelled_at is not None
    out, errors = lines_of(client, batch.output_file_id), lines_of(client, batch.error_file_id)
    assert len(out) + len(errors) == 10
    unsent = [row for row in errors.values() if row["response"] is None]
    assert unsent and all(row["error"]["code"] == "batch_cancelled" for row in unsent)
    assert main(["batches", "--config", str(config), "--cancel", batch_id]) == 1


def test_the_api_answers_openai_errors(chain: tuple[str, Received, FullDisk, Path]) -> None:
    url, _, _, _ = chain
    client = sync_sdk(url)
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
    file_id = upload(client, jsonl([request("a", CHAT, body(0))]))
    with pytest.raises(openai.BadRequestError) as bad:
        client.batches.create(input_file_id=file_id, endpoint=NOPE, completion_window="24h")
    assert bad.value.response.json()["error"]["param"] == "endpoint"
    with pytest.raises(openai.BadRequestError) as bad:
        client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window=HOUR)
    assert bad.value.response.json()["error"]["param"] == "completion_window"
    with pytest.raises(openai.BadRequestError) as bad:
        client.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    assert bad.value.response.json()["error"]["param"] == "purpose"
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
    first = client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    second = client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    page = client.batches.list(limit=1)
    assert [b.id for b in page.data] == [second.id] and page.has_more
    assert [b.id for b in client.batches.list(after=second.id)] == [first.id]


def test_a_batch_past_its_window_ends_expired_with_what_it_answered(
    chain: tuple[str, Received, FullDisk, Path],
) -> None:
    url, engine, disk, _ = chain
    runner = disk.runner
    engine.limit = 3
    client = sync_sdk(url)
    batch_id = create(client, 8)
    wait_for(client, batch_id, ("in_progress",))

    def past(doc: dict[str, Any]) -> dict[str, Any]:
        doc["batch"]["expires_at"] = 0
        return doc

    anyio.run(disk.store.update_batch, batch_id, past)
    deadline = time.monotonic() + 60
    while runner.stopping.get(batch_id) != "expired":  # told before the held lines end
        assert time.monotonic() < deadline, "the runner never saw the window end"
        time.sleep(0.01)
    engine.release.set()
    batch = wait_for(client, batch_id)
    assert batch.status == "expired" and batch.expired_at is not None
    errors = lines_of(client, batch.error_file_id)
    unsent = [row for row in errors.values() if row["response"] is None]
    assert unsent and all(row["error"]["code"] == "batch_expired" for row in unsent)
    assert len(lines_of(client, batch.output_file_id)) + len(errors) == 8


def test_files_past_their_expiry_are_gone(chain: tuple[str, Received, FullDisk, Path]) -> None:
    url, _, disk, _ = chain
    client = sync_sdk(url)
    content = jsonl([request("a", CHAT, body(0))])
    kept = upload(client, content)
    brief = client.files.create(
        file=("x.jsonl", content),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert brief.expires_at == brief.created_at + 3600
    assert anyio.run(disk.store.sweep, brief.created_at + 3601) == 1  # the other has 30 days
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(brief.id)
    assert (
        client.files.retrieve(kept).expires_at == client.files.retrieve(kept).created_at + 2592000
    )
