"""What a cost scenario is: what to start, what to send, what to count, and the measured
call; the runner (bench/cost/runner.py) owns the rest (warm-up, interleaved rounds,
medians, the table, the comparison with another checkout).

A scenario's ``setup`` is an async context manager given the run's ``Context``: it
starts what the scenario needs (a gateway in process, a store, a Redis), yields the
``Case`` rows, and stops it all (and may check what the run left: spans exported, no
span dropped) on exit. Each case is one measured call; the scenario's ``figures`` say
what is counted of it (bench/cost/measure.py).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cost.redis import redis_server
from bench.inprocess import fake_engine


@dataclass(frozen=True)
class Case:
    """One measured call of a scenario: one row of its table."""

    name: str
    # The measured call; when it returns an awaitable, that is awaited (and timed).
    call: Callable[[], Any]
    # Runs number // share times a round (a paced stream, a validator's build).
    share: int = 1
    # The case this one is compared with: its ratio and added columns.
    base: str | None = None
    # Runs after each round's calls, inside the timing (a flush of what they queued).
    finish: Callable[[], Any] | None = None
    # A counter read before and after each round's calls (Redis's EVALSHA count): the
    # ``tally`` figure is its growth per call.
    tally: Callable[[], float] | None = None
    # Columns shown as they are (the request's size).
    info: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What a run shares among its scenarios: options, a scratch folder, started servers."""

    options: Mapping[str, Any]
    directory: Path
    stack: contextlib.ExitStack
    # The cases ``--only`` keeps (none: all): a setup builds no more than they need.
    only: tuple[str, ...] = ()
    # Calls per case per round (a queue sized for a round's spans).
    number: int = 0
    _engine: str | None = None
    _redis: str | None = None

    def option(self, name: str) -> Any:
        """The value of ``--set NAME=...`` (or the scenario's default)."""
        return self.options[name]

    def wanted(self, case: str) -> bool:
        """Whether the case (or the group of cases) named so is measured: a setup may
        skip building what no chosen case needs."""
        return not self.only or any(case.startswith(o) or o.startswith(case) for o in self.only)

    def engine_url(self) -> str:
        """The fast fake engine (bench/fake_engine.py) in its own process, started on
        first use: its CPU is not this process's."""
        if self._engine is None:
            self._engine = self.stack.enter_context(fake_engine())
        return self._engine

    def redis_url(self) -> str:
        """A ``redis-server`` of the run's own on a loopback port, started on first use."""
        if self._redis is None:
            self._redis = self.stack.enter_context(redis_server())
        return self._redis


Setup = Callable[[Context], AbstractAsyncContextManager[list[Case]]]


@dataclass(frozen=True)
class Scenario:
    """One table: its cases (from ``setup``), the figures counted of each, and defaults."""

    name: str
    title: str
    setup: Setup
    figures: tuple[str, ...] = ("p50_us", "cpu_us")
    rounds: int = 7
    number: int = 200
    # Calls of each case before the rounds (connections, caches, first-use imports).
    warmup: int = 20
    # ``--set NAME=VALUE`` options and their defaults (a value is parsed as its default's
    # type).
    options: Mapping[str, Any] = field(default_factory=dict)
    # Figures given as a ratio to the case's base, and as a difference from it.
    compare: tuple[str, ...] = ("cpu_us",)
    added: tuple[str, ...] = ()
    # Rows that add other rows' figures: (name, (case, case, ...)).
    sums: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Column labels in place of the figures' own ("CPU us/request").
    labels: Mapping[str, str] = field(default_factory=dict)


def cases(build: Callable[[Context], list[Case]]) -> Setup:
    """A setup that only builds its cases (nothing to start or stop)."""

    @contextlib.asynccontextmanager
    async def setup(context: Context) -> AsyncIterator[list[Case]]:
        yield build(context)

    return setup


@contextlib.contextmanager
def context(options: Mapping[str, Any]) -> Iterator[Context]:
    """A run's context: a temporary folder, and whatever its scenarios start in it."""
    with tempfile.TemporaryDirectory(prefix="ft-cost-") as tmp, contextlib.ExitStack() as stack:
        yield Context(options, Path(tmp), stack)
