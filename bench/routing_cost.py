"""The routing decision's cost per request, in CPU microseconds.

``python -m bench.routing_cost [--number N] [--replicas N]``

Measured in process, without HTTP, on the pieces the gateway runs for each
request: the affinity key (``Hinter.hint``: the key from ``prompt_cache_key``,
or the content hash of a multi-turn chat body's leading messages), the
placement (``Balancer._place``: least in flight, or the ring walk with the
load bound) and the release when the answer is closed. Then the whole
``Balancer.request`` path over replicas whose clients answer at once, which
adds the counted response and the tallies. Each figure is the median of
several rounds, the contenders interleaved round by round.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.instant import InstantEngine
from bench.table import format_number, markdown
from gateway.routing.config import Affinity
from gateway.routing.hint import NO_HINT, Hint, Hinter
from gateway.upstream.balancer import Balancer

SYSTEM = "You are a helpful assistant for the team's internal tools. " * 30
CHAT: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": SYSTEM},
        *(
            {"role": role, "content": f"Turn {i}: " + "some words of the conversation " * 20}
            for i in range(8)
            for role in ("user", "assistant")
        ),
    ],
    "max_tokens": 64,
}
KEYED = {**CHAT, "prompt_cache_key": "conversation-1234"}


def balancer(routing: str, replicas: int) -> Balancer:
    return Balancer(
        [(f"http://10.0.0.{i}:8000", InstantEngine()) for i in range(replicas)],
        eject_seconds=10,
        routing=routing,
    )


def _cpu_us(number: int, work: Callable[[], object]) -> float:
    start = time.process_time()
    for _ in range(number):
        work()
    return (time.process_time() - start) / number * 1e6


def decision_costs(*, number: int, replicas: int, rounds: int = 5) -> dict[str, float]:
    """CPU µs per request of each piece, median over ``rounds``."""
    hinter = Hinter(Affinity(), low_priority_profiles=frozenset())
    least, affine = balancer("least_in_flight", replicas), balancer("affinity", replicas)
    content = hinter.hint(CHAT, [], client=None, profile=None)
    keyed = hinter.hint(KEYED, [], client=None, profile=None)
    assert content.source == "content" and keyed.source == "prompt_cache_key"

    def place(b: Balancer, hint: Hint) -> Callable[[], object]:
        def work() -> None:
            replica = b._place(hint, set(), None)
            assert replica is not None
            b._release(replica)

        return work

    pieces: dict[str, Callable[[], object]] = {
        "key: prompt_cache_key": lambda: hinter.hint(KEYED, [], client=None, profile=None),
        "key: content hash (17 messages)": lambda: hinter.hint(CHAT, [], client=None, profile=None),
        "place + release: least_in_flight": place(least, NO_HINT),
        "place + release: affinity (bounded load)": place(affine, content),
    }
    samples: dict[str, list[float]] = {name: [] for name in pieces}
    for _ in range(rounds):
        for name, work in pieces.items():
            samples[name].append(_cpu_us(number, work))
    out = {name: statistics.median(values) for name, values in samples.items()}
    out["decision: least_in_flight"] = out["place + release: least_in_flight"]
    out["decision: affinity, content key"] = (
        out["key: content hash (17 messages)"] + out["place + release: affinity (bounded load)"]
    )
    out["decision: affinity, prompt_cache_key"] = (
        out["key: prompt_cache_key"] + out["place + release: affinity (bounded load)"]
    )
    return out


async def request_costs(*, number: int, replicas: int, rounds: int = 5) -> dict[str, float]:
    """CPU µs per ``Balancer.request`` + close over instant replicas, median of rounds."""
    hinter = Hinter(Affinity(), low_priority_profiles=frozenset())
    contenders = {
        "Balancer.request: least_in_flight": (balancer("least_in_flight", replicas), NO_HINT),
        "Balancer.request: affinity": (
            balancer("affinity", replicas),
            hinter.hint(CHAT, [], client=None, profile=None),
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, (b, hint) in contenders.items():
            start = time.process_time()
            for _ in range(number):
                response = await b.request(
                    "POST", "/v1/chat/completions", headers=[], body=b"", hint=hint
                )
                await response.aclose()
            samples[name].append((time.process_time() - start) / number * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def cost_table(costs: dict[str, float]) -> str:
    """The costs as a Markdown table."""
    rows = [["piece", "CPU µs per request"]]
    rows += [[name, format_number(value)] for name, value in costs.items()]
    return markdown(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.routing_cost", description=__doc__)
    parser.add_argument("--number", type=int, default=20000, help="requests per round")
    parser.add_argument("--replicas", type=int, default=4)
    args = parser.parse_args(argv)
    costs = decision_costs(number=args.number, replicas=args.replicas)
    costs |= asyncio.run(request_costs(number=args.number, replicas=args.replicas))
    print(f"Routing decision over {args.replicas} replicas ({args.number} requests a round):")
    print(cost_table(costs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
