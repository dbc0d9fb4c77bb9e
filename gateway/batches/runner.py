"""The runner: finds batches with work left, holds each one's lease while it runs it,
and takes each through validating, in_progress and finalizing to its end.

Every gateway process runs one (every worker of ``serve --workers N``, every
pod). Each ``batches.poll_seconds`` (and at once when this process creates a
batch) it asks the store for unfinished batches and takes the lease of any
that nobody holds, or whose holder stopped renewing it (it died); a lease is
renewed every third of ``batches.lease_seconds`` while its batch runs, and a
runner that finds it lost stops sending that batch's lines at once. So one
runner at a time sends a batch's lines, and a batch outlives the process that
started it: whoever takes it next reads which lines have a recorded answer and
sends only the others.

"Never twice" is exact for a finished line: its answer is recorded (one
transaction, fenced by the lease) before it is counted, and a line with a
recorded answer is never sent again. A line in flight when its runner dies has
no recorded answer and is sent again by the next runner: at least once, with
the same request id (and so the same X-Request-ID to the engine, which an
engine that deduplicates by it can use), its one answer kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway.access.keys import ApiKey
from gateway.background import in_background
from gateway.batches.finish import finish_batch
from gateway.batches.judge import judge_for, target_of
from gateway.batches.lines import LeaseLost, LineSender, LineTally
from gateway.batches.objects import refused_line
from gateway.batches.pacing import Pace, interactive_waiting
from gateway.batches.store import BatchStore, new_id
from gateway.batches.validate import Line, check_file, models_of
from gateway.errors import GatewayError, StoreUnavailable
from gateway.observe.batchmetrics import BatchTallies
from gateway.proxy.endpoint import Caller, ProxyEndpoint
from gateway.settings import Batches
from gateway.state import GatewayState

logger = logging.getLogger("gateway.batches")
Keys = Callable[[], tuple[ApiKey, ...] | None]
# Sweeps of expired files and batches: one poll in this many.
SWEEP_EVERY = 30


class BatchRunner:
    """This process's runner of batches."""

    def __init__(
        self,
        state: GatewayState,
        store: BatchStore,
        settings: Batches,
        *,
        endpoints: dict[str, ProxyEndpoint],
        keys: Keys,
    ) -> None:
        self.state = state
        self.store = store
        self.settings = settings
        self.endpoints = endpoints  # by route path, each ``inprocess``
        self.keys = keys  # the live API keys (None: keys are off)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.running: dict[str, asyncio.Task[None]] = {}
        self.paces: dict[str, Pace] = {}
        self.tally = LineTally()
        self.unfinished: dict[str, int] = {}  # unfinished batches by status, at the last poll
        self.finished: dict[str, int] = {}  # batches this process ended, by status
        self.stopping: dict[str, str] = {}  # batches told to stop sending lines, and why
        self._lost: set[str] = set()
        self._nudged: asyncio.Event | None = None

    def gauges(self, tallies: BatchTallies) -> None:
        """Fill the batch metrics (read when /metrics is scraped)."""
        tallies.unfinished = dict(self.unfinished)
        tallies.finished = dict(self.finished)
        tallies.lines = {
            "completed": self.tally.completed,
            "failed": self.tally.failed,
            "retried": self.tally.retried,
        }
        tallies.cap = {name: pace.cap for name, pace in self.paces.items()}
        tallies.in_flight = {name: pace.in_flight for name, pace in self.paces.items()}
        tallies.backoffs = {name: pace.backoffs for name, pace in self.paces.items()}

    def nudge(self) -> None:
        """Look for work now (a batch was just created here)."""
        if self._nudged is not None:
            self._nudged.set()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Run batches while the block lasts; stop them (leases given back) after."""
        self._nudged = asyncio.Event()
        try:
            async with in_background(self._loop()):
                yield
        finally:
            tasks = list(self.running.values())
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _loop(self) -> None:
        polls = 0
        assert self._nudged is not None
        while True:
            try:
                if polls % SWEEP_EVERY == 0:
                    await self.store.sweep(time.time())
                await self.poll()
            except StoreUnavailable as exc:
                logger.error("batches: the store failed: %s", exc.message)
            except Exception:  # the loop must outlive any one failure
                logger.exception("batches: the runner's poll failed")
            polls += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_seconds):
                    await self._nudged.wait()
            self._nudged.clear()

    async def poll(self) -> None:
        """Take the lease of each unfinished batch nobody runs, and run it."""
        unfinished = await self.store.unfinished()
        counts: dict[str, int] = {}
        for _, status in unfinished:
            counts[status] = counts.get(status, 0) + 1
        self.unfinished = counts
        for batch_id, _ in unfinished:
            if batch_id in self.running:
                continue
            if await self.store.acquire(batch_id, self.holder, self.settings.lease_seconds):
                self.running[batch_id] = asyncio.create_task(self._hold(batch_id))

    async def _hold(self, batch_id: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            async with in_background(self._renew(batch_id, task)):
                await self.run(batch_id)
        except* LeaseLost:
            logger.warning("batch %s: another runner holds it now", batch_id)
        except* StoreUnavailable as group:
            logger.error("batch %s: paused, the store failed: %s", batch_id, group.exceptions[0])
        except* asyncio.CancelledError:
            if batch_id not in self._lost:
                raise
            logger.warning("batch %s: its lease was lost; stopped", batch_id)
        finally:
            self.running.pop(batch_id, None)
            self.stopping.pop(batch_id, None)
            self._lost.discard(batch_id)
            with contextlib.suppress(StoreUnavailable):
                await self.store.release(batch_id, self.holder)

    async def _renew(self, batch_id: str, task: asyncio.Task[None]) -> None:
        seconds = self.settings.lease_seconds
        last = time.monotonic()
        while True:
            await asyncio.sleep(seconds / 3)
            try:
                held = await self.store.acquire(batch_id, self.holder, seconds)
                last = time.monotonic()
            except StoreUnavailable:
                held = time.monotonic() - last < seconds  # not renewed: held until it runs out
            if not held:
                self._lost.add(batch_id)
                task.cancel()
                return

    # One batch, from wherever it stopped.

    async def run(self, batch_id: str) -> None:
        """Take the batch on from its status as stored, to its end."""
        doc = await self.store.get_batch(batch_id)
        if doc is None:
            return
        status = doc["batch"]["status"]
        if status == "validating":
            doc = await self._validate(doc)
            if doc is None:
                return
            status = doc["batch"]["status"]
        lines: list[Line] = []
        if status in ("in_progress", "finalizing", "cancelling"):
            lines = await self._lines(doc)
        if status == "in_progress":
            status = await self._execute(doc, lines)
        if status in ("finalizing", "cancelling", "expired"):
            final = {"finalizing": "completed", "cancelling": "cancelled"}.get(status, status)
            await self._finish(doc, final, lines)

    async def _lines(self, doc: dict[str, Any]) -> list[Line]:
        content = await self.store.batch_input(doc["batch"]["id"]) or b""
        return check_file(
            content,
            endpoint=doc["batch"]["endpoint"],
            max_lines=self.settings.max_lines,
            judge=lambda body: None,
        ).lines

    async def _finish(self, doc: dict[str, Any], status: str, lines: list[Line]) -> None:
        ended = await finish_batch(
            self.store, doc, status, lines=lines, file_ttl=self.settings.file_ttl
        )
        if ended is not None:
            self.finished[status] = self.finished.get(status, 0) + 1
            logger.info(
                "batch %s %s",
                doc["batch"]["id"],
                status,
                extra={
                    "batch": doc["batch"]["id"],
                    "request_counts": ended["batch"]["request_counts"],
                },
            )

    async def _validate(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        batch = doc["batch"]
        batch_id = batch["id"]
        now = int(time.time())
        if now >= batch["expires_at"]:
            await self._finish(doc, "expired", [])
            return None
        content = await self.store.batch_input(batch_id) or b""
        endpoint = self.endpoints[batch["endpoint"]]
        judge = judge_for(self.state, endpoint.route, client=doc["client"], profile=doc["profile"])
        checked = check_file(
            content, endpoint=batch["endpoint"], max_lines=self.settings.max_lines, judge=judge
        )
        if checked.errors:

            def failed(current: dict[str, Any]) -> dict[str, Any]:
                b = current["batch"]
                b["status"] = "failed"
                b["failed_at"] = int(time.time())
                b["errors"] = {"object": "list", "data": checked.errors}
                return current

            await self.store.update_batch(batch_id, failed)
            self.finished["failed"] = self.finished.get("failed", 0) + 1
            return None
        for line in checked.lines:
            if line.refusal is not None:
                data = refused_line(
                    new_id("batch_req_"),
                    line.custom_id,
                    line.refusal,
                    request_id=f"{batch_id}-{line.number}",
                )
                if await self.store.record(batch_id, self.holder, line.number, True, data):
                    self.tally.failed += 1
        model = models_of(checked.lines)

        def started(current: dict[str, Any]) -> dict[str, Any]:
            b = current["batch"]
            if b["status"] == "validating":
                b["status"] = "in_progress"
                b["in_progress_at"] = int(time.time())
            b["model"] = model
            b["request_counts"] = {"total": len(checked.lines), "completed": 0, "failed": 0}
            return current

        return await self.store.update_batch(batch_id, started)

    def _caller(self, doc: dict[str, Any]) -> Callable[[], Caller | None]:
        client, profile, owner = doc["client"], doc["profile"], doc["owner"]

        def caller() -> Caller | None:
            keys = self.keys()
            if keys is None or client is None:
                return Caller(client, profile, owner)
            for key in keys:
                if key.name == client:
                    return Caller(client, key.profile, owner)
            return None

        return caller

    def pace(self, name: str) -> Pace:
        """The pace of deployment ``name`` ("": the single one)."""
        pace = self.paces.get(name)
        if pace is None:
            pace = self.paces[name] = Pace(self.settings.concurrency, lambda: self._waiting(name))
        return pace

    def _waiting(self, name: str) -> int:
        for engine in self.state.engines.engines:
            if engine.name == name:
                return interactive_waiting(engine.upstream)()
        return 0

    def _deployment(self, doc: dict[str, Any], line: Line) -> str:
        try:
            target = target_of(self.state, doc["client"], doc["profile"], line.body.get("model"))
        except GatewayError:
            return ""  # the endpoint answers it with that error
        return target.engine.name if target is not None else ""

    async def _execute(self, doc: dict[str, Any], lines: list[Line]) -> str:
        """Send the lines with no recorded answer; the status the batch goes on to."""
        batch = doc["batch"]
        batch_id = batch["id"]
        done = {number for number, _, _ in await self.store.results(batch_id)}
        groups: dict[str, list[Line]] = {}
        for line in lines:
            if line.number not in done:
                groups.setdefault(self._deployment(doc, line), []).append(line)
        sender = LineSender(
            batch_id=batch_id,
            path=batch["endpoint"],
            endpoint=self.endpoints[batch["endpoint"]],
            caller=self._caller(doc),
            store=self.store,
            holder=self.holder,
            retry_seconds=self.settings.retry_seconds,
            tally=self.tally,
            traceparent=doc.get("traceparent"),
        )
        stop: list[str] = []
        async with in_background(self._watch(batch_id, stop)):
            async with asyncio.TaskGroup() as group:

                async def one(line: Line, pace: Pace) -> None:
                    try:
                        await sender.run(line, pace)
                    finally:
                        await pace.give()

                async def dispatch(name: str, queue: list[Line]) -> None:
                    pace = self.pace(name)
                    for line in queue:
                        await pace.take()
                        if stop:
                            await pace.give()
                            return
                        group.create_task(one(line, pace))

                for name, queue in groups.items():
                    group.create_task(dispatch(name, queue))
        if stop:
            return stop[0]

        def finalizing(current: dict[str, Any]) -> dict[str, Any] | None:
            b = current["batch"]
            if b["status"] != "in_progress":
                return None
            b["status"] = "finalizing"
            b["finalizing_at"] = int(time.time())
            return current

        ended = await self.store.update_batch(batch_id, finalizing)
        return ended["batch"]["status"] if ended is not None else "finalizing"

    async def _watch(self, batch_id: str, stop: list[str]) -> None:
        """Stop sending a batch's lines once it is cancelled or its window ends (as the
        store has it: both may change while it runs)."""
        while not stop:
            await asyncio.sleep(min(self.settings.poll_seconds, 1.0))
            with contextlib.suppress(StoreUnavailable):
                doc = await self.store.get_batch(batch_id)
                if doc is None:
                    continue
                if time.time() >= doc["batch"]["expires_at"]:
                    stop.append("expired")
                elif doc["batch"]["status"] == "cancelling":
                    stop.append("cancelling")
        self.stopping[batch_id] = stop[0]
