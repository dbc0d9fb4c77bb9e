"""The ``routing`` scenario: the routing decision's pieces, in CPU microseconds per request.

In process, without HTTP, the pieces the gateway runs for each request: the affinity
key (``Hinter.hint``: from ``prompt_cache_key``, or the content hash of a multi-turn
chat body's leading messages), the placement (``Balancer._place``: least in flight, or
the ring walk with the load bound) and the release when the answer is closed; each
decision is the sum of its key and its placement. Then the whole ``Balancer.request``
path over replicas whose clients answer at once (bench/instant.py), which adds the
counted response and the tallies. bench/routing.py prints it beside its workloads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.cost.scenario import Case, Context, Scenario, cases
from bench.instant import InstantEngine
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
KEY_CACHE, KEY_CONTENT = "key: prompt_cache_key", "key: content hash (17 messages)"
PLACE_LEAST = "place + release: least_in_flight"
PLACE_AFFINITY = "place + release: affinity (bounded load)"


def balancer(routing: str, replicas: int) -> Balancer:
    """A balancer over ``replicas`` instant engines."""
    return Balancer(
        [(f"http://10.0.0.{i}:8000", InstantEngine()) for i in range(replicas)],
        eject_seconds=10,
        routing=routing,
    )


def _placing(b: Balancer, hint: Hint) -> Callable[[], None]:
    def work() -> None:
        replica = b._place(hint, set(), None)
        if replica is None:
            raise SystemExit("no replica placed")
        b._release(replica)

    return work


def _requesting(b: Balancer, hint: Hint) -> Callable[[], Any]:
    async def work() -> None:
        response = await b.request("POST", "/v1/chat/completions", headers=[], body=b"", hint=hint)
        await response.aclose()

    return work


def _routing(ctx: Context) -> list[Case]:
    replicas = ctx.option("replicas")
    hinter = Hinter(Affinity(), low_priority_profiles=frozenset())
    content = hinter.hint(CHAT, [], client=None, profile=None)
    keyed = hinter.hint(KEYED, [], client=None, profile=None)
    if (content.source, keyed.source) != ("content", "prompt_cache_key"):
        raise SystemExit(f"the hints' sources are {content.source}, {keyed.source}")
    least, affine = balancer("least_in_flight", replicas), balancer("affinity", replicas)
    return [
        Case(KEY_CACHE, lambda: hinter.hint(KEYED, [], client=None, profile=None)),
        Case(KEY_CONTENT, lambda: hinter.hint(CHAT, [], client=None, profile=None)),
        Case(PLACE_LEAST, _placing(least, NO_HINT)),
        Case(PLACE_AFFINITY, _placing(affine, content)),
        Case(
            "Balancer.request: least_in_flight",
            _requesting(balancer("least_in_flight", replicas), NO_HINT),
        ),
        Case("Balancer.request: affinity", _requesting(balancer("affinity", replicas), content)),
    ]


ROUTING = Scenario(
    "routing",
    "the routing decision over `replicas` replicas, in process",
    cases(_routing),
    figures=("cpu_us",),
    compare=(),
    rounds=5,
    number=20000,
    warmup=200,
    options={"replicas": 4},
    sums=(
        ("decision: least_in_flight", (PLACE_LEAST,)),
        ("decision: affinity, content key", (KEY_CONTENT, PLACE_AFFINITY)),
        ("decision: affinity, prompt_cache_key", (KEY_CACHE, PLACE_AFFINITY)),
    ),
    labels={"case": "piece", "cpu_us": "CPU µs per request"},
)
