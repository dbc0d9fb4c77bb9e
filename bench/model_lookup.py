"""What routing by model costs per request: ``ModelRouter.route`` on a fleet's table.

``python -m bench.model_lookup [--deployments N] [--number N] [--rounds N]``

The look-up alone, as the endpoint calls it after the body is parsed: a table of
``--deployments`` deployments with two served names and an alias each, the model
asked for by name, by alias and (refused) unknown. It prints the Python calls and
bytecodes per look-up (counted, so they hold on a loaded machine) and CPU
nanoseconds per look-up (the median of interleaved rounds: meaningful only on a
quiet machine). The target is under 2 µs; with one deployment the endpoint does not
call it at all (``GatewayState.router`` is None: one attribute test).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from gateway.errors import ModelNotFound
from gateway.fleet.router import ModelRouter
from gateway.proxy.call import Call
from gateway.upstream.engines import Engine, Engines, Target


def _table(deployments: int) -> Engines:
    targets: dict[str, Target] = {}
    engines = []
    for i in range(deployments):
        engine = Engine(f"d{i}", object(), f"http://127.0.0.1:{9000 + i}", policy=None)  # type: ignore[arg-type]
        engines.append(engine)
        for j in range(2):
            targets[f"model-{i}-{j}"] = Target(engine, f"model-{i}-{j}")
        targets[f"alias-{i}"] = Target(engine, f"model-{i}-0", alias=True)
    return Engines(engines[0], targets, tuple(engines))


class _State:
    models = None


def _router(deployments: int) -> ModelRouter:
    state: Any = _State()
    state.engines = _table(deployments)
    state.settings = None
    return ModelRouter(state)


def _call() -> Call:
    scope = {"headers": [], "method": "POST", "path": "/v1/chat/completions"}
    return Call("/v1/chat/completions", scope, lambda message: None)  # type: ignore[arg-type,return-value]


def _once(router: ModelRouter, call: Call, model: str) -> None:
    try:
        router.route(call, {"model": model}, "messages")
    except ModelNotFound:
        pass


def count(router: ModelRouter, call: Call, model: str) -> tuple[int, int]:
    """(Python calls, bytecodes) of one look-up."""
    calls = opcodes = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal calls, opcodes
        if event == "call":
            calls += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            opcodes += 1
        return trace

    # Whatever traced before (coverage, under pytest --cov) is put back after: left
    # unset, it stopped measuring every test that ran later.
    tracer = sys.gettrace()
    sys.settrace(trace)
    try:
        _once(router, call, model)
    finally:
        sys.settrace(tracer)
    return calls - 1, opcodes  # less _once itself


def cpu_ns(router: ModelRouter, call: Call, model: str, number: int) -> float:
    route, body = router.route, {"model": model}
    start = time.process_time_ns()
    for _ in range(number):
        route(call, body, "messages")
    return (time.process_time_ns() - start) / number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=8)
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    router, call = _router(args.deployments), _call()
    print(f"{args.deployments} deployments, {len(router.state.engines.targets)} names")
    print("| asked | calls | bytecodes | CPU ns (median) |")
    print("|---|---|---|---|")
    last = args.deployments - 1
    asked = (("served name", f"model-{last}-1"), ("alias", f"alias-{last}"), ("unknown", "gpt-5"))
    for label, model in asked:
        calls, opcodes = count(router, call, model)
        if label == "unknown":
            print(f"| {label} (404) | {calls} | {opcodes} | - |")
            continue
        times = [cpu_ns(router, call, model, args.number) for _ in range(args.rounds)]
        print(f"| {label} | {calls} | {opcodes} | {statistics.median(times):.0f} |")


if __name__ == "__main__":
    main()
