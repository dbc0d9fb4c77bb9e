"""Continuous batching: one asyncio loop steps every active row together.

Requests join the running batch at step boundaries and leave it when they finish
or their client goes away. Each step computes the logits of every active row and
samples them all in ONE ``sampler.sample()`` call, with per-row (seed, step):
seed = the request's seed, or ``sampler.random_seed()`` drawn at admission;
step = the number of tokens that row has generated so far.

``seed_mode`` and ``batch_variant_logits`` reproduce engines that break that
contract (modes.py): ``unpatched`` mimics ft serve before its sampler patch (issue
#693): the request's seed is ignored and the noise of the whole batch comes from one
shared numpy Generator, so a seeded replay differs whenever the batch around it
differs; ``per-batch`` keys one stream for the batch by its first seeded row.

A scripted row (structured outputs and tool calls, drawn before it joins:
structured/answer.py) takes a step like the others but writes its script's next
piece instead of a sampled token, so it shares the batch, max_tokens, stop strings
and cancellation with the rows the model writes.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import numpy.typing as npt

import sampler
from refengine.events import Finished, Piece, RowEvent
from refengine.model import TrigramModel
from refengine.modes import PER_BATCH, PER_ROW, SEED_MODES, UNPATCHED, batch_seeds, batch_variance
from refengine.params import SamplingParams
from refengine.penalties import apply_penalties
from refengine.stops import StopScanner

# With thinking on, the model writes this many tokens between <think> and </think>.
THINK_TOKENS = 8
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _has_waiting(count: int, stats: EngineStats) -> bool:
    return stats.waiting >= count


@dataclass
class EngineStats:
    """Counters for tests and probes; ``batch_sizes`` maps rows-per-step to steps."""

    waiting: int = 0
    active: int = 0
    admitted: int = 0
    finished: int = 0
    cancelled: int = 0
    steps: int = 0
    tokens: int = 0
    max_batch_seen: int = 0
    batch_sizes: Counter[int] = field(default_factory=Counter)


@dataclass(eq=False)  # a row is itself: the batcher finds and removes it by identity
class Row:
    """One request in the engine: its prompt, its tokens so far and its event queue."""

    row_id: int
    prompt: list[int]
    params: SamplingParams
    _: KW_ONLY
    thinking: bool
    cache: npt.NDArray[np.int64]
    # A scripted answer (structured outputs, tool calls: structured/answer.py): one piece
    # per step instead of the model's tokens, then Finished(script_end).
    script: tuple[Piece, ...] | None = None
    script_end: str = "stop"
    stop_label: str = "stop"  # the finish reason of a text that ends by itself
    seed: int | None = field(init=False)
    generated: list[int] = field(init=False, default_factory=list)
    finish_reason: str | None = field(init=False, default=None)
    events: asyncio.Queue[RowEvent] = field(init=False, default_factory=asyncio.Queue)

    def __post_init__(self) -> None:
        self.seed = self.params.seed
        self._stops = StopScanner(self.params.stop)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def _finish(self, reason: str, *, flush: bool = True) -> None:
        rest = self._stops.flush() if flush else ""
        if rest:
            self.events.put_nowait(rest)
        self.finish_reason = reason
        self.events.put_nowait(Finished(reason))


class Engine:
    """The batcher: ``submit`` rows, ``cancel`` them, and ``run`` the step loop."""

    def __init__(
        self,
        model: TrigramModel,
        *,
        max_batch: int = 32,
        unpatched_sampler: bool = False,
        seed_mode: str = PER_ROW,
        batch_variant_logits: bool = False,
        step_delay_s: float = 0.0,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if seed_mode not in SEED_MODES:
            raise ValueError(f"seed_mode must be one of {', '.join(SEED_MODES)}")
        if unpatched_sampler:
            if seed_mode not in (PER_ROW, UNPATCHED):
                raise ValueError("unpatched_sampler and seed_mode are exclusive")
            seed_mode = UNPATCHED
        self.model = model
        self.tokenizer = model.tokenizer
        self.max_batch = max_batch
        self.seed_mode = seed_mode
        self.batch_variant_logits = batch_variant_logits
        self.step_delay_s = step_delay_s
        self.stats = EngineStats()
        self._waiting: deque[Row] = deque()
        self._active: list[Row] = []
        self._ids = itertools.count(1)
        self._waiters: list[tuple[Callable[[EngineStats], bool], asyncio.Future[None]]] = []
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._shared_rng = np.random.default_rng()  # the unpatched path's one generator
        self._groups: deque[int] = deque()
        self.loop: asyncio.AbstractEventLoop | None = None  # run()'s, for other threads

    # -- called by request handlers -------------------------------------------------

    def submit(
        self,
        prompt: list[int],
        params: SamplingParams,
        *,
        thinking: bool = False,
        script: tuple[Piece, ...] | None = None,
        script_end: str = "stop",
        stop_label: str = "stop",
    ) -> Row:
        """Queue a request; it joins the batch at the next step boundary. ``script``: the
        answer's pieces, one a step, ending with ``script_end`` (or "length" at
        max_tokens); ``stop_label``: the finish reason when the model's text ends itself."""
        if script is not None and not script:
            raise ValueError("a script has at least one piece")
        row = Row(
            next(self._ids),
            prompt,
            params,
            thinking=thinking and script is None,
            cache=self.model.prompt_cache(prompt),
            script=script,
            script_end=script_end,
            stop_label=stop_label,
        )
        self._waiting.append(row)
        self._update_counts()
        return row

    def cancel(self, row: Row) -> None:
        """Drop a row whose client went away; a finished row is left alone."""
        if row.done:
            return
        if row in self._waiting:
            self._waiting.remove(row)
        elif row in self._active:
            self._active.remove(row)
        else:
            return
        row.finish_reason = "cancelled"
        self.stats.cancelled += 1
        self._update_counts()

    # -- for tests and probes ---------------------------------------------------------

    def pause(self) -> None:
        """Stop stepping after the current step (requests still queue up)."""
        self._resumed.clear()

    def resume(self) -> None:
        """Step again; everything queued meanwhile joins the same step."""
        self._resumed.set()
        self._update_counts()

    def gather(self, *groups: int) -> None:
        """Admit the next requests in groups: hold the batch (no step) until each group has
        arrived in full, admit it and step once, then hold for the next. Requests sent a
        group at a time then share steps, in group order, whatever the timing."""
        if any(size < 1 for size in groups):
            raise ValueError("a group has at least one request")
        self._groups.extend(groups)
        self._update_counts()

    async def wait_until(self, predicate: Callable[[EngineStats], bool]) -> None:
        """Return once ``predicate(stats)`` holds (checked after every change)."""
        if predicate(self.stats):
            return
        waiter = (predicate, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await waiter[1]
        finally:
            self._waiters.remove(waiter)

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Step the batch forever (cancel the task to stop)."""
        self.loop = asyncio.get_running_loop()
        while True:
            await self._resumed.wait()
            if self._groups:
                await self.wait_until(functools.partial(_has_waiting, self._groups[0]))
                self._groups.popleft()
            self._admit()
            if not self._active:
                await self.wait_until(lambda s: s.waiting > 0)
                continue
            self.step()
            # Yield between steps so HTTP keeps flowing and new requests can join.
            await asyncio.sleep(self.step_delay_s)

    def step(self) -> None:
        """Compute, sample and append one token for every active row."""
        everyone = list(self._active)
        rows = [r for r in everyone if r.script is None]
        for row in everyone:
            if row.script is not None:
                self._advance(row, row.script)
        if rows:
            self._sample(rows)
        for row in everyone:
            if row.done:
                self._active.remove(row)
                self.stats.finished += 1
        self.stats.steps += 1
        self.stats.tokens += len(everyone)
        self.stats.batch_sizes[len(everyone)] += 1
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(everyone))
        self._update_counts()

    def _sample(self, rows: list[Row]) -> None:
        """One model token for each of ``rows``, sampled in one call."""
        vocab = self.model.vocab_size
        logits = self.model.logits(
            [(r.prompt + r.generated)[-2:] for r in rows], [r.cache for r in rows]
        )
        if self.batch_variant_logits:
            batch_variance(logits)
        for i, row in enumerate(rows):
            apply_penalties(logits[i], row.params, prompt=row.prompt, generated=row.generated)
            if row.thinking:
                self._steer_thinking(logits[i], len(row.generated))
        steps = [len(r.generated) for r in rows]
        if self.seed_mode == UNPATCHED:
            seeds = self._shared_rng.integers(
                _INT64_MIN, _INT64_MAX, size=len(rows), dtype=np.int64, endpoint=True
            )
        elif self.seed_mode == PER_BATCH:
            keyed, steps = batch_seeds([r.params.seed for r in rows], steps, rows[0].seed or 0)
            seeds = np.array(keyed, dtype=np.int64)
        else:
            seeds = np.array([r.seed for r in rows], dtype=np.int64)
        tokens = sampler.sample(
            logits,
            seeds=seeds,
            steps=steps,
            temperature=[r.params.temperature for r in rows],
            top_k=[r.params.top_k if 0 < r.params.top_k < vocab else 0 for r in rows],
            top_p=[r.params.top_p for r in rows],
            min_p=[r.params.min_p for r in rows],
        )
        for row, token in zip(rows, tokens.tolist(), strict=True):
            self._append(row, token)

    def _advance(self, row: Row, script: tuple[Piece, ...]) -> None:
        """A scripted row's next piece (it counts as one token): text goes through the
        stop strings as the model's text does, a tool call's piece as it is."""
        piece = script[len(row.generated)]
        row.generated.append(self.tokenizer.unk_id)
        if isinstance(piece, str):
            text, stopped = row._stops.feed(piece)
            if text:
                row.events.put_nowait(text)
            if stopped:
                row._finish("stop", flush=False)
                return
        else:
            row.events.put_nowait(piece)
        if len(row.generated) == len(script):
            row._finish(row.script_end)
        elif len(row.generated) >= row.params.max_tokens:
            row._finish("length")

    def _admit(self) -> None:
        while self._waiting and len(self._active) < self.max_batch:
            row = self._waiting.popleft()
            if row.seed is None:
                row.seed = sampler.random_seed()  # one code path for seeded and unseeded rows
            self._active.append(row)
            self.stats.admitted += 1
        self._update_counts()

    def _append(self, row: Row, token: int) -> None:
        context = row.generated or row.prompt  # a completion continues its prompt's text
        previous = context[-1] if context else None
        row.generated.append(token)
        if token == self.tokenizer.eos_id:
            row._finish(row.stop_label)
            return
        text, stopped = row._stops.feed(self.tokenizer.piece(previous, token))
        if text:
            row.events.put_nowait(text)
        if stopped:
            row._finish(row.stop_label, flush=False)
        elif len(row.generated) >= row.params.max_tokens:
            row._finish("length")

    def _steer_thinking(self, logits: npt.NDArray[np.float32], position: int) -> None:
        """<think>, then THINK_TOKENS words (no end of text), then </think>."""
        tok = self.tokenizer
        if position == 0 or position == THINK_TOKENS + 1:
            forced = tok.think_start_id if position == 0 else tok.think_end_id
            logits[:] = -np.inf
            logits[forced] = 0.0
        elif position <= THINK_TOKENS:
            logits[tok.eos_id] = -np.inf

    def _update_counts(self) -> None:
        self.stats.waiting = len(self._waiting)
        self.stats.active = len(self._active)
        for predicate, future in self._waiters:
            if not future.done() and predicate(self.stats):
                future.set_result(None)
