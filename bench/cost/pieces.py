"""Scenarios of parts of the gateway called alone, without HTTP: what each costs a call.

- ``merge``: a streamed chunk checked by the relay (``EventReader.feed``, a parse) and
  rewritten by fan-out (``StreamMerge.rewrite``: a second parse, index and id, a dump);
- ``limiter``: ``Limiter.admit`` (before the engine is called) and ``settle`` (after
  the answer) for a key with every limit set, high enough never to refuse, through each
  store: this process's, the workers' shared memory, a Redis of the run's own (one
  ``EVALSHA`` each, counted by Redis), and the same script through redis-py's asyncio
  client, the contender the store does not use;
- ``observers``: the metrics and access-log observers' ``started`` and ``finished`` on
  a streamed chat exchange with two policy outcomes, the logs to /dev/null;
- ``model-lookup``: ``ModelRouter.route`` on a fleet's table (by name, by alias, an
  unknown name): counted and timed.

The policy's own scenarios (``policy``, ``report``, ``validators``) are in
bench/cost/policy.py, the routing decision's in bench/cost/routing.py.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import redis.asyncio as aioredis

from bench.cost.redis import command_calls
from bench.cost.scenario import Case, Context, Scenario, cases
from bench.fake_engine import stream_events
from gateway.errors import ModelNotFound
from gateway.fleet.router import ModelRouter
from gateway.limits.config import RateLimits
from gateway.limits.limiter import Limiter, make_limiter
from gateway.limits.meter import Usage
from gateway.limits.redisstore import ACQUIRE
from gateway.observe.exchange import Exchange, Observer, Observers
from gateway.observe.logs import AccessLog
from gateway.observe.metrics import Metrics
from gateway.policy.engine import Outcome
from gateway.proxy.call import Call
from gateway.proxy.events import EventReader
from gateway.proxy.merge import StreamMerge
from gateway.upstream.engines import Engine, Engines, Target

HIGH = {
    "requests_per_minute": 10**9,
    "tokens_per_minute": 10**12,
    "tokens_per_day": 10**13,
    "concurrent_requests": 10**6,
}


def _merge(ctx: Context) -> list[Case]:
    event = stream_events()[1]
    reader, merge, turns = EventReader(), StreamMerge(3, include_usage=False), itertools.count()
    return [
        Case("checked (single relay and fan-out)", lambda: reader.feed(event)),
        Case("rewritten (fan-out only)", lambda: merge.rewrite(next(turns) % 3, event)),
    ]


MERGE = Scenario(
    "merge",
    "per streamed chunk (a 64-chunk stream's typical event)",
    cases(_merge),
    figures=("wall_us",),
    compare=(),
    number=20000,
    warmup=100,
    labels={"case": "step", "wall_us": "us/event"},
)


def _limiter_cases(name: str, limiter: Limiter, tally: Callable[[], float] | None) -> list[Case]:
    tickets: collections.deque[Any] = collections.deque()
    keys = itertools.count()
    usage = Usage(10, 50, 60)

    async def admit() -> None:
        tickets.append(await limiter.admit(f"key-{next(keys) % 8}", None, tokens=100))

    async def settle() -> None:
        if not tickets:  # (settle alone, by --only: each needs an admitted ticket)
            await admit()
        await limiter.settle(tickets.popleft(), usage, status=200)

    return [
        Case(f"{name}: admit", admit, tally=tally),
        Case(f"{name}: settle", settle, tally=tally),
    ]


@contextlib.asynccontextmanager
async def _limiter(ctx: Context) -> AsyncIterator[list[Case]]:
    stores = [s for s in ("local", "shared", "redis") if ctx.wanted(s)]
    found: list[Case] = []
    limiters = []
    client = None
    try:
        for store in stores:
            config: dict[str, Any] = {"default": HIGH}
            tally = None
            if store == "redis":
                url = ctx.redis_url()
                config |= {"store": "redis", "redis": {"url": url, "timeout": 0.5}}
                tally = lambda url=url: float(command_calls(url, "evalsha"))  # noqa: E731
            worker_dir = ctx.directory / "workers" if store == "shared" else None
            if worker_dir is not None:
                worker_dir.mkdir()
            limiter = make_limiter(
                RateLimits.model_validate(config), worker_dir=worker_dir, worker_index=0
            )
            if limiter is None:
                raise SystemExit("no limiter for a configuration with limits")
            limiters.append(limiter)
            found += _limiter_cases(store, limiter, tally)
        if ctx.wanted("redis via redis-py"):
            client = aioredis.Redis.from_url(ctx.redis_url())
            script = client.register_script(ACQUIRE)
            leases = itertools.count()
            keys = ["bench:{redis-py}", "bench:{redis-py}:leases"]

            async def evalsha() -> None:
                args: list[int | str] = [*HIGH.values(), 100, f"lease-{next(leases)}", 30_000_000]
                await script(keys=keys, args=args)

            found.append(Case("redis via redis-py (not used): admit", evalsha))
        yield found
    finally:
        for limiter in limiters:
            await limiter.aclose()
        if client is not None:
            await client.aclose()


LIMITER = Scenario(
    "limiter",
    "the limiter alone, one key of 8 with all four limits (never refusing), per store",
    _limiter,
    figures=("wall_us", "cpu_us", "tally"),
    compare=(),
    number=2000,
    labels={"case": "store: call", "wall_us": "us", "cpu_us": "CPU us", "tally": "round trips"},
)


def exchanges(n: int) -> list[Exchange]:
    """``n`` finished-looking exchanges: a streamed chat completion, two policy outcomes."""
    out = []
    for _ in range(n):
        e = Exchange(
            "POST",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "e18993c3950b4273a4994f887630fc44",
            model="Qwen3.8-Flash-Next",
            status=200,
            stream=True,
            upstream_status=200,
            bytes_out=4000,
        )
        e.outcomes = [Outcome("user", "stripped"), Outcome("n", "neutral")]
        e.upstream_started = time.perf_counter()
        e.first_byte = e.upstream_started + 0.01
        out.append(e)
    return out


@contextlib.asynccontextmanager
async def _observers(ctx: Context) -> AsyncIterator[list[Case]]:
    with open(os.devnull, "wb") as devnull:
        made: dict[str, Callable[[], Observer]] = {
            "metrics": Metrics,
            "access log, json, to /dev/null": lambda: AccessLog(devnull),
            "access log, text, to /dev/null": lambda: AccessLog(devnull, format="text"),
            "metrics + json access log": lambda: Observers(Metrics(), AccessLog(devnull)),
        }
        found = []
        for label, make in made.items():
            observer, pool = make(), itertools.cycle(exchanges(1000))

            def call(observer: Observer = observer, pool: Any = pool) -> None:
                exchange = next(pool)
                observer.started(exchange)
                observer.finished(exchange)

            found.append(Case(label, call))
        yield found
        await asyncio.sleep(0)  # the access logs' last flush, before /dev/null closes


OBSERVERS = Scenario(
    "observers",
    "the observers' started and finished on a streamed chat completion's record "
    "(two policy outcomes); the access log flushes once per event-loop turn",
    _observers,
    figures=("wall_us", "cpu_us"),
    compare=(),
    rounds=5,
    number=100_000,
    warmup=1000,
    labels={"case": "observer", "wall_us": "us per request", "cpu_us": "CPU us per request"},
)


class _State:
    models = None


def lookup_table(deployments: int) -> ModelRouter:
    """A router over ``deployments`` deployments, two served names and an alias each."""
    targets: dict[str, Target] = {}
    engines = []
    for i in range(deployments):
        engine = Engine(f"d{i}", object(), f"http://127.0.0.1:{9000 + i}", policy=None)  # type: ignore[arg-type]
        engines.append(engine)
        for j in range(2):
            targets[f"model-{i}-{j}"] = Target(engine, f"model-{i}-{j}")
        targets[f"alias-{i}"] = Target(engine, f"model-{i}-0", alias=True)
    state: Any = _State()
    state.engines = Engines(engines[0], targets, tuple(engines))
    state.settings = None
    return ModelRouter(state)


def _lookups(ctx: Context) -> list[Case]:
    last = ctx.option("deployments") - 1
    router = lookup_table(last + 1)
    scope = {"headers": [], "method": "POST", "path": "/v1/chat/completions"}
    call = Call("/v1/chat/completions", scope, lambda message: None)  # type: ignore[arg-type,return-value]
    route = router.route

    def asking(model: str) -> Callable[[], None]:
        body = {"model": model}

        def once() -> None:
            try:
                route(call, body, "messages")
            except ModelNotFound:
                pass

        return once

    asked = (("served name", f"model-{last}-1"), ("alias", f"alias-{last}"), ("unknown", "gpt-5"))
    return [Case(label, asking(model)) for label, model in asked]


MODEL_LOOKUP = Scenario(
    "model-lookup",
    "ModelRouter.route as the endpoint calls it after the body is parsed, on a table of "
    "`deployments` deployments (two served names and an alias each; unknown: a 404)",
    cases(_lookups),
    figures=("calls", "opcodes", "cpu_us"),
    compare=(),
    rounds=5,
    number=200_000,
    warmup=1000,
    options={"deployments": 8},
    labels={"case": "asked", "cpu_us": "CPU us"},
)
