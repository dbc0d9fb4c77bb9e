"""The Responses route against the chat route: CPU and latency per request, side by side.

``python -m bench.responses_cost [--rounds N] [--number N] [--client NAME]``

The gateway runs in this process, called as an ASGI app with hand-written
``receive``/``send``, in front of the fast fake engine (bench/fake_engine.py) in its
own process over loopback, as bench/fanout_cost.py does. The same question goes
to ``POST /v1/chat/completions`` (a chat body: relayed as the engine sends it) and
to ``POST /v1/responses`` (a Responses body: policy, translated onto chat
completions, the answer rebuilt as a ``response`` object, each streamed chunk
turned into Responses events), one request at a time, interleaved round by
round so a noisy machine slows both alike: JSON, streamed (64 chunks at once),
and paced streams (64 chunks 1 ms apart, each arriving on its own). No response
store (``store.backend: none``): what is measured is the translation. The table
gives medians of the rounds and the ratios responses / chat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.fanout_cost import PACED, fake_engine
from bench.table import format_number, markdown
from gateway.app.factory import create_app
from gateway.settings import Settings, load_settings

QUESTION = "Tell me about cats."
CHAT: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": QUESTION}],
    "max_tokens": 64,
}
RESPONSES: dict[str, Any] = {"model": "fake-model", "input": QUESTION, "max_output_tokens": 64}


class _Call:
    """One client request as the ASGI server would hand it to the app."""

    def __init__(self, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"gateway"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        self._body = body
        self._sent_body = False
        self._done = asyncio.Event()
        self.status = 0

    async def receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._done.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif not message.get("more_body", False):
            self._done.set()


@dataclass(frozen=True)
class Variant:
    """One kind of request measured."""

    name: str
    path: str
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    share: int = 1  # runs number // share requests per round (paced streams are slow)


def variants() -> list[tuple[Variant, Variant]]:
    """Pairs of (the chat request, the same question on the Responses route)."""
    chat, responses = "/v1/chat/completions", "/v1/responses"
    pairs = []
    for kind, extra, headers, share in (
        ("json", {}, [], 1),
        ("stream", {"stream": True}, [], 1),
        ("paced stream", {"stream": True}, PACED, 10),
    ):
        pairs.append(
            (
                Variant(f"{kind} chat", chat, orjson.dumps(CHAT | extra), headers, share),
                Variant(
                    f"{kind} responses", responses, orjson.dumps(RESPONSES | extra), headers, share
                ),
            )
        )
    return pairs


async def _one(app: Any, variant: Variant) -> float:
    call = _Call(variant.path, variant.body, variant.headers)
    start = time.perf_counter()
    await app(call.scope, call.receive, call.send)
    elapsed = time.perf_counter() - start
    if call.status != 200:
        raise SystemExit(f"the gateway answered {call.status} to {variant.name}")
    return elapsed


async def measure(
    settings: Settings, measured: list[Variant], *, rounds: int, number: int
) -> dict[str, tuple[float, float]]:
    """Per variant: (median p50 latency in us, median CPU us per request)."""
    app = create_app(settings)
    latency: dict[str, list[float]] = {v.name: [] for v in measured}
    cpu: dict[str, list[float]] = {v.name: [] for v in measured}
    async with app.router.lifespan_context(app):
        for variant in measured:  # warm up: connections, caches
            for _ in range(max(1, 20 // variant.share)):
                await _one(app, variant)
        for _ in range(rounds):
            for variant in measured:
                count = max(1, number // variant.share)
                times = []
                cpu_start = time.process_time()
                for _ in range(count):
                    times.append(await _one(app, variant))
                cpu[variant.name].append((time.process_time() - cpu_start) / count * 1e6)
                latency[variant.name].append(statistics.median(times) * 1e6)
    return {
        name: (statistics.median(latency[name]), statistics.median(cpu[name])) for name in latency
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.responses_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200, help="requests per variant per round")
    parser.add_argument("--client", default=None, help="upstream.client (default: the default)")
    args = parser.parse_args(argv)
    pairs = variants()
    measured = [v for pair in pairs for v in pair]
    with fake_engine() as url:
        overrides: dict[tuple[str, ...], Any] = {
            ("upstream", "url"): url,
            ("log", "requests"): False,
        }
        if args.client is not None:
            overrides[("upstream", "client")] = args.client
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
        settings = load_settings(None, overrides=overrides, environ=environ)
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
            figures = asyncio.run(
                measure(settings, measured, rounds=args.rounds, number=args.number)
            )
        else:
            figures = uvloop.run(
                measure(settings, measured, rounds=args.rounds, number=args.number)
            )
    rows = []
    for chat, responses in pairs:
        for variant in (chat, responses):
            p50, cpu = figures[variant.name]
            rows.append([variant.name, format_number(p50), format_number(cpu), "", ""])
        rows[-1][3] = format_number(figures[responses.name][0] / figures[chat.name][0])
        rows[-1][4] = format_number(figures[responses.name][1] / figures[chat.name][1])
    print(
        f"through the gateway ({settings.upstream.client}) to the fast fake engine, one request "
        f"at a time: medians of {args.rounds} rounds of {args.number} requests each "
        f"({max(1, args.number // 10)} for paced streams: 64 chunks 1 ms apart)"
    )
    header = ["request", "p50 latency us", "CPU us/request", "latency ratio", "CPU ratio"]
    print(markdown([header, *rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
