"""``n`` served by fan-out: n engine requests for one client request, merged.

The policy action ``fanout`` (``n: {action: fanout, maximum: 8}``) takes ``n``
out of the body; the endpoint then calls ``FanOut.answer`` inside its one
frame (the client watcher, the Cutoff, the drain). The n requests go out at
once, each on its own through the upstream client, so a Balancer spreads them
over the replicas; the engine's id for each is the client's request id with
``-<i>`` appended. Before the client's response starts, every answer's head
must be in: the first failure (in index order among those seen) ends the
fan-out, the others are closed, and the client gets exactly what a single
request failing so would get (a status). After it starts, the n streams are
relayed as their events arrive, rewritten by merge.py; any one failing ends
the whole answer with an error event and closes the others.

Seeds: ``derive_seed``. Without a ``seed`` every request goes without one
(the engine draws its own, so the choices differ); with one, choice 0 keeps
the client's seed (so it is the answer ``n: 1`` gives) and choice i > 0 gets
``derive_seed(seed, i)``: the same request gives the same n choices every time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway._types import Headers
from gateway.cutoff import Cutoff
from gateway.errors import GatewayError, UpstreamError
from gateway.limits.meter import answer_usage, total_usage, usage_of
from gateway.observe.exchange import Exchange
from gateway.proxy.answers import check_head, whole_answer
from gateway.proxy.events import EventSplitter
from gateway.proxy.fingerprint import stamp_answer, stamp_events
from gateway.proxy.headers import DROP_DOWNSTREAM, choice_headers, filter_headers
from gateway.proxy.merge import StreamMerge, merge_answers
from gateway.proxy.relay import error_end, stream_cut_short, stream_too_large
from gateway.proxy.responder import Responder
from gateway.settings import Limits
from gateway.upstream.base import UpstreamClient, UpstreamResponse

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's increment: 2^64 / the golden ratio, odd


def derive_seed(seed: int, index: int) -> int:
    """The seed of choice ``index`` of a request with ``seed``.

    Index 0 keeps ``seed``. Index i > 0 gets the i-th output of SplitMix64
    (Steele, Lea and Flood, 2014) started at ``seed``: with
    ``x = (seed + i * 0x9E3779B97F4A7C15) mod 2**64``,
    ``x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 mod 2**64``,
    ``x = (x ^ (x >> 27)) * 0x94D049BB133111EB mod 2**64``,
    ``x = x ^ (x >> 31)``, read as a signed 64-bit integer (two's complement), the
    range OpenAI allows a seed and engines store it in. A negative ``seed`` enters
    as its two's complement.
    """
    if index == 0:
        return seed
    x = (seed + index * _GAMMA) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    x ^= x >> 31
    return x - (1 << 64) if x >> 63 else x


def fanout_bodies(body: dict[str, Any], n: int) -> list[bytes]:
    """The n request bodies (``body`` has no ``n`` any more): the same body n times,
    but with a ``seed``, choice i's seed is ``derive_seed(seed, i)``."""
    seed = body.get("seed")
    first = orjson.dumps(body)
    if type(seed) is not int:
        return [first] * n
    return [first] + [orjson.dumps({**body, "seed": derive_seed(seed, i)}) for i in range(1, n)]


def with_usage(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` asking the engine for the usage chunk of a stream (for metering)."""
    options = body.get("stream_options")
    options = dict(options) if isinstance(options, dict) else {}
    options["include_usage"] = True
    return {**body, "stream_options": options}


def include_usage(body: dict[str, Any]) -> bool:
    """Whether a streaming ``body`` asks for the usage chunk at the end."""
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


@dataclass(slots=True)
class _Head:
    """One engine answer once its head is in: its body too unless it is a stream."""

    response: UpstreamResponse
    headers: Headers  # those the client may get
    data: bytes | None


class FanOut:
    """One client request answered by n engine requests."""

    def __init__(
        self,
        upstream: UpstreamClient,
        *,
        limits: Limits,
        responder: Responder,
        exchange: Exchange,
        cutoff: Cutoff,
        fingerprint: bytes | None = None,
    ) -> None:
        self.upstream = upstream
        self.fingerprint = fingerprint  # system_fingerprint, for engines that send none
        self.limits = limits
        self.responder = responder
        self.exchange = exchange
        self.cutoff = cutoff
        self._starts: list[asyncio.Task[_Head]] = []
        self._readers: list[asyncio.Task[None]] = []

    async def answer(
        self,
        method: str,
        path: str,
        *,
        headers: Headers,
        bodies: list[bytes],
        include_usage: bool,
        hide_usage: bool = False,
    ) -> None:
        """Send the n requests (``bodies`` is emptied once they are out) and answer the
        client; every engine response is closed when this returns or is cancelled (the
        client left, the drain expired)."""
        try:
            heads = await self._start_all(method, path, headers, bodies)
            if heads is None:
                return
            if heads[0].data is None:
                await self._relay(heads, include_usage=include_usage, hide_usage=hide_usage)
            else:
                await self._merge(heads)
        finally:
            self.cutoff.disarm()
            await self._close()

    async def _start_all(
        self, method: str, path: str, headers: Headers, bodies: list[bytes]
    ) -> list[_Head] | None:
        """Every answer's head (and whole body unless streaming); None if a failure
        was answered already; raises an UpstreamError to be answered as a status."""
        loop = asyncio.get_running_loop()
        for i, body in enumerate(bodies):
            start = self._start(method, path, headers=choice_headers(headers, i), body=body)
            self._starts.append(loop.create_task(start))
        bodies.clear()  # each task holds its own until sent, not for the life of a stream
        pending: set[asyncio.Task[_Head]] = set(self._starts)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(_failed(task) for task in done):
                break
        for task in self._starts:
            if task.done() and _failed(task):
                error = task.exception()
                if error is not None:
                    raise error
                head = task.result()
                await self._answer_whole(head.response.status, head.headers, head.data or b"")
                return None
        heads = [task.result() for task in self._starts]
        self.exchange.upstream_status = heads[0].response.status
        self.exchange.upstream_replica = getattr(
            heads[0].response, "replica", self.exchange.upstream_replica
        )
        return heads

    async def _start(self, method: str, path: str, *, headers: Headers, body: bytes) -> _Head:
        response = await self.upstream.request(method, path, headers=headers, body=body)
        del body, headers
        try:
            out = filter_headers(response.headers, DROP_DOWNSTREAM)
            if check_head(response.status, out, stream=self.exchange.stream):
                return _Head(response, out, None)
            data = await response.read(self.limits.max_response_bytes)
        except BaseException:
            await response.aclose()
            raise
        return _Head(response, out, data)

    async def _answer_whole(self, status: int, headers: Headers, data: bytes) -> None:
        self.exchange.upstream_status = status
        self.exchange.first_byte = time.perf_counter()
        if self.exchange.trace is not None and status < 400:
            self.exchange.trace.answer(data)
        if self.fingerprint is not None and status < 400:
            data = stamp_answer(data, self.fingerprint)
        headers, data = whole_answer(status, headers, data)
        await self.responder.start(status, headers)
        await self.responder.body(data)

    async def _merge(self, heads: list[_Head]) -> None:
        answers = [head.data or b"" for head in heads]
        self.exchange.usage = total_usage([answer_usage(a) for a in answers])
        data = merge_answers(answers)
        await self._answer_whole(heads[0].response.status, heads[0].headers, data)

    async def _relay(self, heads: list[_Head], *, include_usage: bool, hide_usage: bool) -> None:
        n = len(heads)
        queue: asyncio.Queue[tuple[int, bytes | None, Exception | None]] = asyncio.Queue(n)
        loop = asyncio.get_running_loop()
        headers = heads[0].headers
        headers.append((b"cache-control", b"no-cache"))
        headers.append((b"x-accel-buffering", b"no"))
        await self.responder.start(heads[0].response.status, headers)
        for i, head in enumerate(heads):
            self._readers.append(loop.create_task(_read(i, head.response, queue)))
        try:
            failure = await self._merge_streams(
                queue, n, include_usage=include_usage, hide_usage=hide_usage
            )
            if failure is not None:
                self.exchange.failed(failure)
                await self.responder.body(error_end(failure), more=True)
            await self.responder.body(b"")
        except OSError:
            # The client hung up; ``answer`` closes the engine's responses.
            self.exchange.client_disconnected = True

    async def _merge_streams(
        self,
        queue: asyncio.Queue[tuple[int, bytes | None, Exception | None]],
        n: int,
        *,
        include_usage: bool,
        hide_usage: bool,
    ) -> GatewayError | None:
        """Relay the n streams' events as they come; the failure that ends them, if any."""
        splitters = [EventSplitter() for _ in range(n)]
        merge = StreamMerge(n, include_usage=include_usage, hide_usage=hide_usage)
        try:
            return await self._merged(queue, splitters, merge)
        finally:
            self.exchange.usage = total_usage([usage_of(u) for u in merge.usages])

    async def _merged(
        self,
        queue: asyncio.Queue[tuple[int, bytes | None, Exception | None]],
        splitters: list[EventSplitter],
        merge: StreamMerge,
    ) -> GatewayError | None:
        n = len(splitters)
        limit = self.limits.max_stream_bytes
        size = ended = finished = 0
        while ended < n:
            index, chunk, error = await queue.get()
            splitter = splitters[index]
            if chunk is None:
                ended += 1
                if splitter.done:
                    continue  # a failure after [DONE] loses nothing
                if error is None:
                    return stream_cut_short()
                if isinstance(error, UpstreamError):
                    return error
                raise error
            if splitter.done:
                continue  # read to the end so the connection can be reused
            size += len(chunk)
            if size > limit:
                return stream_too_large(limit)
            events, failure = splitter.feed(chunk)
            if events:
                out = merge.rewrite(index, events)
                if out and self.fingerprint is not None:
                    out = stamp_events(out, self.fingerprint)
                if out:
                    if self.exchange.first_byte is None:
                        self.exchange.first_byte = time.perf_counter()
                    if self.exchange.trace is not None:
                        self.exchange.trace.events(out)
                    await self.responder.body(out, more=True)
            if failure is not None:
                return failure
            if splitter.done:
                finished += 1
                if finished == n:
                    await self.responder.body(merge.end(), more=True)
        return None

    async def _close(self) -> None:
        """Stop every task and close every engine response (cut or not, at once)."""
        tasks: list[asyncio.Task[Any]] = [*self._readers, *self._starts]
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.wait(tasks)
        finally:
            # Even if that wait was itself cancelled: a task still running closes
            # its own response as its cancellation reaches it; these are the rest.
            failure: BaseException | None = None
            for task in tasks:
                if not task.done() or task.cancelled() or task.exception() is not None:
                    continue  # (exception() marks it retrieved: nothing logged as lost)
                head = task.result()
                if isinstance(head, _Head):
                    try:
                        await head.response.aclose()
                    except BaseException as exc:  # the others must be closed all the same
                        failure = failure or exc
            if failure is not None:
                raise failure


def _failed(task: asyncio.Task[_Head]) -> bool:
    return task.exception() is not None or task.result().response.status >= 400


async def _read(
    index: int,
    response: UpstreamResponse,
    queue: asyncio.Queue[tuple[int, bytes | None, Exception | None]],
) -> None:
    """Feed one stream's chunks to ``queue`` as they arrive, then (index, None, error)."""
    try:
        async for chunk in response.chunks():
            await queue.put((index, chunk, None))
    except Exception as exc:
        await queue.put((index, None, exc))
    else:
        await queue.put((index, None, None))
