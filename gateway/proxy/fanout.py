"""``n`` served by fan-out: n engine requests for one client request, merged.

The policy action ``fanout`` (``n: {action: fanout, maximum: 8}``) takes ``n``
out of the body; the endpoint then asks ``FanOut.start`` for the engine's
answer instead of the upstream client, inside its one frame (the client
watcher, the Cutoff, the drain). The n requests go out at once, each on its
own through the upstream client, so a Balancer spreads them over the replicas;
the engine's id for each is the client's request id with ``-<i>`` appended.
Every answer's head must be in before the client's response starts: the first
failure (in index order among those seen) is the answer, the others are
closed, and the client gets exactly what a single request failing so would get
(a status). Otherwise the answer is one engine answer made of n: the merged
JSON (merge.py), or one stream of the n streams' events, rewritten as they
arrive; it goes to the client as any engine answer does, through the route and
the one relay loop, so fan-out composes with any route. One stream failing
ends the merged stream with that failure, which the route frames.

Seeds: ``derive_seed``. Without a ``seed`` every request goes without one
(the engine draws its own, so the choices differ); with one, choice 0 keeps
the client's seed (so it is the answer ``n: 1`` gives) and choice i > 0 gets
``derive_seed(seed, i)``: the same request gives the same n choices every time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from gateway._types import Headers
from gateway.limits.meter import Usage, answer_usage, total_usage, usage_of
from gateway.proxy.answers import check_head
from gateway.proxy.call import Call
from gateway.proxy.events import EventReader
from gateway.proxy.headers import DEFAULT_HEADERS, HeaderPolicy, choice_headers
from gateway.proxy.merge import StreamMerge, merge_answers
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


_Queue = asyncio.Queue[tuple[int, bytes | None, Exception | None]]


class _Answer:
    """The n engine answers as one (an UpstreamResponse): a whole body or a stream."""

    def __init__(self, fanout: FanOut, head: _Head, *, data: bytes | None = None) -> None:
        self.fanout = fanout
        self.status = head.response.status
        self.headers = head.headers
        self.replica: str | None = getattr(head.response, "replica", None)
        self._data = data if data is not None else head.data

    def chunks(self) -> AsyncIterator[bytes]:
        self.fanout.stream = stream = self.fanout.merged()  # (closed by close())
        return stream

    async def read(self, limit: int) -> bytes:
        return self._data or b""  # each answer was read within the limit

    def finish(self) -> None:
        self.fanout.finish()

    async def aclose(self) -> None:
        await self.fanout.close()


class FanOut:
    """One client request answered by n engine requests."""

    def __init__(
        self,
        upstream: UpstreamClient,
        call: Call,
        *,
        limits: Limits,
        headers: HeaderPolicy = DEFAULT_HEADERS,
    ) -> None:
        self.upstream = upstream
        self.call = call
        self.limits = limits
        self.headers = headers  # the route's: which engine headers the client may get
        self.usage: Usage | None = None  # every engine request's, summed
        self._heads: list[_Head] = []
        self.stream: AsyncGenerator[bytes] | None = None  # merged(), once it is read
        self._starts: list[asyncio.Task[_Head]] = []
        self._readers: list[asyncio.Task[None]] = []

    async def start(
        self, method: str, path: str, *, headers: Headers, bodies: list[bytes]
    ) -> UpstreamResponse:
        """Send the n requests (``bodies`` is emptied once they are out) and give back
        their answer as one; every engine response is closed by its ``aclose``, or here
        if this fails or is cancelled (the client left, the drain expired)."""
        try:
            return await self._start_all(method, path, headers, bodies)
        except BaseException:
            await self.close()
            raise

    async def _start_all(
        self, method: str, path: str, headers: Headers, bodies: list[bytes]
    ) -> _Answer:
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
                return _Answer(self, task.result())
        heads = self._heads = [task.result() for task in self._starts]
        if heads[0].data is None:
            return _Answer(self, heads[0])
        answers = [head.data or b"" for head in heads]
        self.usage = total_usage([answer_usage(a) for a in answers])
        return _Answer(self, heads[0], data=merge_answers(answers))

    async def _start(self, method: str, path: str, *, headers: Headers, body: bytes) -> _Head:
        response = await self.upstream.request(
            method, path, headers=headers, body=body, hint=self.call.hint
        )
        del body, headers
        try:
            out = self.headers.to_client(response.headers)
            if check_head(response.status, out, stream=self.call.record.stream):
                return _Head(response, out, None)
            data = await response.read(self.limits.max_response_bytes)
        except BaseException:
            await response.aclose()
            raise
        return _Head(response, out, data)

    async def merged(self) -> AsyncGenerator[bytes]:
        """The n streams' events as one engine stream, as they come; it stops early
        where a stream ends before its ``[DONE]`` (the relay calls that cut short) and
        raises the failure of a stream that breaks."""
        n = len(self._heads)
        queue: _Queue = asyncio.Queue(n)
        loop = asyncio.get_running_loop()
        for i, head in enumerate(self._heads):
            self._readers.append(loop.create_task(_read(i, head.response, queue)))
        readers = [EventReader() for _ in range(n)]
        call = self.call
        merge = StreamMerge(n, include_usage=call.include_usage, hide_usage=call.hide)
        ended = finished = 0
        try:
            while ended < n:
                index, chunk, error = await queue.get()
                reader = readers[index]
                if chunk is None:
                    ended += 1
                    if reader.done:
                        continue  # a failure after [DONE] loses nothing
                    if error is None:
                        return
                    raise error
                if reader.done:
                    continue  # read to the end so the connection can be reused
                events, _, failure = reader.feed(chunk)
                if events:
                    out = merge.rewrite(index, events)
                    if out:
                        yield out
                if failure is not None:
                    raise failure
                if reader.done:
                    finished += 1
                    if finished == n:
                        # (The relay reads no further than this end.)
                        self.usage = total_usage([usage_of(u) for u in merge.usages])
                        yield merge.end()
        finally:
            self.usage = total_usage([usage_of(u) for u in merge.usages])

    def finish(self) -> None:
        """Every stream came to its end event: each response may keep its connection."""
        for head in self._heads:
            head.response.finish()

    async def close(self) -> None:
        """Stop every task and close every engine response (cut or not, at once)."""
        if self.stream is not None:
            stream, self.stream = self.stream, None
            await stream.aclose()
        tasks: list[asyncio.Task[Any]] = [*self._readers, *self._starts]
        self._readers, self._starts = [], []
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


def fan_out(
    upstream: UpstreamClient,
    call: Call,
    *,
    limits: Limits,
    headers: HeaderPolicy = DEFAULT_HEADERS,
) -> FanOut:
    """The fan-out of ``call`` over ``upstream`` (``headers``: its route's table)."""
    return FanOut(upstream, call, limits=limits, headers=headers)


def _failed(task: asyncio.Task[_Head]) -> bool:
    return task.exception() is not None or task.result().response.status >= 400


async def _read(index: int, response: UpstreamResponse, queue: _Queue) -> None:
    """Feed one stream's chunks to ``queue`` as they arrive, then (index, None, error)."""
    try:
        async for chunk in response.chunks():
            await queue.put((index, chunk, None))
    except Exception as exc:
        await queue.put((index, None, exc))
    else:
        await queue.put((index, None, None))
