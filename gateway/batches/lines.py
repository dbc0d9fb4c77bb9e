"""A batch's lines sent and their answers kept: each line once through the live
endpoint (inprocess.py), sent again only when no engine took it, its answer recorded
before it is counted.

A line the engines could not take (429 from the batch key's own limits, 503 from a
full queue, a draining gateway or no replica, 502 ``upstream_unreachable``: nothing
reached an engine) is not an answer: it waits (``Retry-After``, else
``batches.retry_seconds`` doubling to 30 s) and goes again, and its deployment's pace
backs off. Any other answer is final, 2xx to the output file and anything else to
the error file, as the client would have got it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.batches.inprocess import Answer, send_line
from gateway.batches.objects import output_line
from gateway.batches.pacing import Pace
from gateway.batches.store import BatchStore, new_id
from gateway.batches.validate import Line
from gateway.errors import AuthenticationFailed, StoreUnavailable
from gateway.proxy.endpoint import Caller, ProxyEndpoint

logger = logging.getLogger("gateway.batches")
MAX_RETRY_SECONDS = 30.0
_RETRIED_CODES = frozenset({"upstream_unreachable"})


class LeaseLost(Exception):
    """Another runner holds the batch now: this one stops sending its lines."""


@dataclass
class LineTally:
    """Lines this process finished, by outcome, and its retries (metrics)."""

    completed: int = 0
    failed: int = 0
    retried: int = 0


def retry_after(answer: Answer, waited: float) -> float | None:
    """Seconds to wait before sending a line again (None: the answer is final)."""
    status = answer.status
    if status not in (429, 502, 503):
        return None
    if status == 502:
        try:
            code = orjson.loads(bytes(answer.body))["error"]["code"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
        if code not in _RETRIED_CODES:
            return None
    told = next((v for n, v in answer.headers if n == b"retry-after"), None)
    try:
        asked = float(told) if told is not None else 0.0
    except ValueError:
        asked = 0.0
    return min(MAX_RETRY_SECONDS, max(asked, waited))


def answer_body(answer: Answer) -> Any:
    """The answer's JSON body (its text where an engine sent something else)."""
    try:
        return orjson.loads(bytes(answer.body))
    except orjson.JSONDecodeError:
        return bytes(answer.body).decode(errors="replace")


class LineSender:
    """Sends one batch's lines and records their answers, as the lease holder."""

    def __init__(
        self,
        *,
        batch_id: str,
        path: str,
        endpoint: ProxyEndpoint,
        caller: Callable[[], Caller | None],
        store: BatchStore,
        holder: str,
        retry_seconds: float,
        tally: LineTally,
        traceparent: str | None,
    ) -> None:
        self.batch_id = batch_id
        self.path = path
        self.endpoint = endpoint
        self.caller = caller  # the key's identity now (None: the key was removed)
        self.store = store
        self.holder = holder
        self.retry_seconds = retry_seconds
        self.tally = tally
        self.traceparent = traceparent

    def request_id(self, line: Line) -> str:
        """The line's request id (the access log's, the engine's X-Request-ID's source):
        the same each time the line is sent."""
        return f"{self.batch_id}-{line.number}"

    async def run(self, line: Line, pace: Pace) -> None:
        """Send ``line`` (its pace slot held by the caller) until it has a final answer,
        then record it."""
        request_id = self.request_id(line)
        body = orjson.dumps(line.body)
        wait = self.retry_seconds
        while True:
            caller = self.caller()
            if caller is None:
                exc = AuthenticationFailed("The API key that created this batch was removed.")
                await self.keep(line, exc.status, request_id, exc.openai_error())
                return
            answer = await send_line(
                self.endpoint,
                self.path,
                body,
                caller=caller,
                request_id=request_id,
                traceparent=self.traceparent,
            )
            delay = retry_after(answer, wait)
            if delay is None:
                break
            self.tally.retried += 1
            pace.back_off()
            await asyncio.sleep(delay)
            wait = min(MAX_RETRY_SECONDS, wait * 2)
        await self.keep(line, answer.status, request_id, answer_body(answer))

    async def keep(self, line: Line, status: int, request_id: str, body: Any) -> None:
        """Record the line's final answer (retried while the store fails; LeaseLost when
        another runner holds the batch)."""
        failed = not 200 <= status < 300
        data = output_line(
            new_id("batch_req_"), line.custom_id, status=status, request_id=request_id, body=body
        )
        await self.record(line.number, failed, data)

    async def record(self, number: int, failed: bool, data: bytes) -> None:
        """Keep one line's output line once, then count it."""
        wait = self.retry_seconds
        while True:
            try:
                kept = await self.store.record(self.batch_id, self.holder, number, failed, data)
                break
            except StoreUnavailable as exc:
                logger.error("batch %s: line %d not recorded yet: %s", self.batch_id, number, exc)
                await asyncio.sleep(wait)
                wait = min(MAX_RETRY_SECONDS, wait * 2)
        if not kept:
            # Either the lease went to another runner (which sends what is unrecorded) or
            # the line was recorded already: only the lease says which.
            if not await self.store.holds(self.batch_id, self.holder):
                raise LeaseLost(self.batch_id)
            return
        if failed:
            self.tally.failed += 1
        else:
            self.tally.completed += 1
