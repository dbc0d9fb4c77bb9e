"""Counting one checkout's Python work per request, in this process (bench/callcount.py
runs it in a fresh interpreter per checkout: ``python -m bench.callcounter TREE``).

The checkout's ``gateway/`` goes first on ``sys.path``, so a baseline tree (another
checkout, e.g. cb7ab99, whose modules have other names) is counted by the same code;
its own ``config.yaml`` (its policy, its access log, written to /dev/null) is used.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import importlib
import json
import logging.config
import os
import pstats
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from bench.inprocess import Call, fake_engine, run

# The versions that move the totals (not the own calls) when they change.
LIBRARIES = ("starlette", "pydantic", "pydantic-core", "httptools", "orjson", "uvloop", "anyio")

# A four-message conversation of about 1 KB, as the bench's chat scenarios send.
MESSAGES = [
    {
        "role": "system",
        "content": "You are a concise assistant for a veterinary clinic. Answer in plain "
        "words, in at most three sentences, and say when a question needs a vet to see "
        "the animal in person.",
    },
    {
        "role": "user",
        "content": "My cat has started drinking much more water than usual over the last "
        "two weeks, and she seems hungrier too, although she is losing weight. She is "
        "eleven years old. Should I be worried?",
    },
    {
        "role": "assistant",
        "content": "Drinking and eating more while losing weight can be signs of kidney "
        "disease, diabetes or an overactive thyroid, all common in older cats. Please book "
        "a visit soon: a blood and urine test will tell which it is.",
    },
    {
        "role": "user",
        "content": "Thank you. Is there anything I should do at home until the appointment, "
        "and is there something I should write down to tell the vet, such as how much "
        "she drinks in a day?",
    },
]
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
EMBEDDINGS = "/v1/embeddings"
MESSAGES_API = "/v1/messages"  # Anthropic's Messages API, translated onto chat
# The same conversation as Anthropic's clients send it: the system prompt apart.
ANTHROPIC = {
    "model": "fake-model",
    "system": MESSAGES[0]["content"],
    "messages": MESSAGES[1:],
    "max_tokens": 64,
}
# A retrieval batch: 16 passages of a few sentences. The engine answers 64 floats each
# (about 20 KB, under one loopback segment: it arrives in one read, so the counts do not
# depend on how a loaded machine splits it; 1,536 each, 490 KB, came in a varying number
# of reads); the memory cost scenario (bench/cost/requests.py) asks for the full width.
NARROW = ((b"x-fake-embeddings-width", b"64"),)
PASSAGES = [f"{m['content']} (passage {i})" for i in range(4) for m in MESSAGES]


@dataclass(frozen=True)
class Kind:
    """One request kind counted: its route, body and extra headers."""

    name: str
    path: str
    body: dict[str, Any]
    headers: tuple[tuple[bytes, bytes], ...] = ()


KINDS = [
    Kind("chat json", CHAT, {"model": "fake-model", "messages": MESSAGES, "max_tokens": 64}),
    Kind(
        "chat stream",
        CHAT,
        {"model": "fake-model", "messages": MESSAGES, "max_tokens": 64, "stream": True},
    ),
    Kind(
        "responses json",
        RESPONSES,
        {"model": "fake-model", "input": MESSAGES, "max_output_tokens": 64},
    ),
    Kind(
        "responses stream",
        RESPONSES,
        {"model": "fake-model", "input": MESSAGES, "max_output_tokens": 64, "stream": True},
    ),
    Kind("messages json", MESSAGES_API, ANTHROPIC),
    Kind("messages stream", MESSAGES_API, {**ANTHROPIC, "stream": True}),
    Kind(
        "embeddings json",
        EMBEDDINGS,
        {"model": "fake-model", "input": PASSAGES, "encoding_format": "float"},
        NARROW,
    ),
]
FIGURE_NAMES = ("own", "python", "builtin", "opcodes")


class Counter:
    """A ``sys.setprofile`` hook (calls) and a ``sys.settrace`` hook (bytecodes run):
    counted, and per function when asked."""

    def __init__(self, own_prefix: str, *, per_function: bool = False) -> None:
        self._own_prefix = own_prefix
        self._own: dict[object, bool] = {}
        self.python = 0
        self.own = 0
        self.builtin = 0
        self.opcodes = 0
        self.functions: collections.Counter[str] | None = (
            collections.Counter() if per_function else None
        )
        self.function_opcodes: collections.Counter[str] | None = (
            collections.Counter() if per_function else None
        )

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            self.python += 1
            code = frame.f_code
            own = self._own.get(code)
            if own is None:
                own = self._own[code] = code.co_filename.startswith(self._own_prefix)
            if own:
                self.own += 1
            if self.functions is not None:
                self.functions[_where(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        elif event == "c_call":
            self.builtin += 1
            if self.functions is not None:
                self.functions[f"<built-in> {getattr(arg, '__qualname__', arg)}"] += 1

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        return self._opcode

    def _opcode(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            self.opcodes += 1
            if self.function_opcodes is not None:
                code = frame.f_code
                where = _where(code.co_filename, code.co_firstlineno, code.co_name)
                self.function_opcodes[where] += 1
        return self._opcode


def _where(filename: str, line: int, name: str) -> str:
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    else:
        filename = os.path.relpath(filename)
    return f"{filename}:{line}({name})"


def _gateway() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """create_app, load_settings, logging_config of whichever checkout is first on
    sys.path (their modules moved when the package was split up)."""
    found = []
    for candidates in (
        (("gateway.app.factory", "gateway.app"), "create_app"),
        (("gateway.settings",), "load_settings"),
        (("gateway.observe.logs", "gateway.logs"), "logging_config"),
    ):
        modules, name = candidates
        for module in modules:
            with contextlib.suppress(ImportError, AttributeError):
                found.append(getattr(importlib.import_module(module), name))
                break
        else:
            raise SystemExit(f"no {name} in {', '.join(modules)}")
    return found[0], found[1], found[2]


@contextlib.contextmanager
def _logs_to_devnull() -> Iterator[None]:
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            yield
        finally:
            sys.stdout = stdout


async def _count(
    tree: Path, url: str, number: int, profile: str | None
) -> dict[str, dict[str, Any]]:
    create_app, load_settings, logging_config = _gateway()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
    settings = load_settings(
        tree / "config.yaml", overrides={("upstream", "url"): url}, environ=environ
    )
    logging.config.dictConfig(logging_config(settings.log.format))
    app = create_app(settings)
    own_prefix = str(tree / "gateway") + os.sep
    counts: dict[str, dict[str, Any]] = {}
    async with app.router.lifespan_context(app):
        bodies = {kind.name: orjson.dumps(kind.body) for kind in KINDS}
        # Warm up (connections, caches, first-use imports); a route this checkout
        # does not have (an older one: no /v1/responses) is left out.
        served = [kind for kind in KINDS if await _one(app, kind, bodies[kind.name], None)]
        for kind in served:
            for _ in range(20):
                await _one(app, kind, bodies[kind.name], None)
        for kind in served:
            if profile is not None and kind.name != profile:
                continue
            least: dict[str, Any] = {}
            functions: collections.Counter[str] = collections.Counter()
            opcodes: collections.Counter[str] = collections.Counter()
            for _ in range(number):
                counter = Counter(own_prefix, per_function=profile is not None)
                await _one(app, kind, bodies[kind.name], counter)
                for figure in FIGURE_NAMES:
                    least[figure] = min(least.get(figure, 1 << 62), getattr(counter, figure))
                if counter.functions is not None and counter.function_opcodes is not None:
                    functions.update(counter.functions)
                    opcodes.update(counter.function_opcodes)
            if profile is not None:
                least["functions"] = {k: v / number for k, v in functions.most_common()}
                least["function_opcodes"] = {k: v / number for k, v in opcodes.most_common()}
                least["cprofile"] = await _cprofile(app, kind, bodies[kind.name], number * 10)
            counts[kind.name] = least
    return counts


async def _cprofile(app: Any, kind: Kind, body: bytes, number: int) -> list[list[Any]]:
    """cProfile over ``number`` requests: per function, calls, own and cumulative
    microseconds per request (the profiler's own cost included: compare trees, not
    absolute figures), by own time."""
    profiler = cProfile.Profile(time.process_time)
    for _ in range(number):
        call = Call(body, list(kind.headers), kind.path)
        profiler.enable()
        await app(call.scope, call.receive, call.send)
        profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        [_where(*where), calls / number, own * 1e6 / number, cumulative * 1e6 / number]
        for where, (_, calls, own, cumulative, _) in stats.items()
    ]
    return sorted(rows, key=lambda row: -row[2])


async def _one(app: Any, kind: Kind, body: bytes, counter: Counter | None) -> bool:
    """One request (False: this checkout has no such route)."""
    call = Call(body, list(kind.headers), kind.path)
    tracer = sys.gettrace()
    if counter is not None:
        sys.setprofile(counter.profile)
        sys.settrace(counter.trace)
    try:
        await app(call.scope, call.receive, call.send)
    finally:
        if counter is not None:
            sys.setprofile(None)
            sys.settrace(tracer)
    if call.status == 404 and counter is None:
        return False
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status} to {kind.name}")
    return True


def environment() -> dict[str, str]:
    """What the totals depend on besides the gateway's code."""
    versions = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in LIBRARIES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    """Print the counts of the checkout ``TREE`` as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.callcounter")
    parser.add_argument("tree", type=Path)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--profile", default=None, help="a request kind: also per function")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    with fake_engine() as url, _logs_to_devnull():
        counts = run(_count(tree, url, args.number, args.profile))
    print(json.dumps({"environment": environment(), "counts": counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
