"""The policy engine's cost per request, with and without the rules inside messages.

``python -m bench.policy_cost [--policy FILE] [--rounds N] [--number N]``

Two compilations of the same policy file run on the same bodies, interleaved
round by round so that a noisy machine slows both alike: the file as it is,
and the file with every ``select`` and ``fields`` (the nested rules) taken
out. The difference is what the nested checks cost; the table gives it for a
typical chat body (a system and a user message) and for longer conversations,
to show that it grows linearly with the number of messages.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.table import format_number, markdown
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.file import FieldRule, PolicyFile
from gateway.policy.loading import load_policy_file

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "/v1/chat/completions"
SIZES = (2, 10, 50)


def chat_body(messages: int) -> dict[str, Any]:
    """A chat request as clients send it: a system prompt, then turns of a conversation."""
    turns: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(messages - 1):
        role = "user" if i % 2 == 0 else "assistant"
        turns.append({"role": role, "content": f"Turn {i}: tell me more about cats."})
    return {
        "model": "Qwen3.8-Flash-Next",
        "messages": turns,
        "temperature": 0.7,
        "max_tokens": 256,
        "stream": True,
    }


def _flat(rule: FieldRule) -> FieldRule:
    return rule.model_copy(update={"select": None, "fields": None})


def without_nested(source: PolicyFile) -> PolicyFile:
    """``source`` with no rule inside any value (top-level rules as they are)."""
    routes = {
        name: route.model_copy(update={"fields": {n: _flat(r) for n, r in route.fields.items()}})
        for name, route in source.routes.items()
    }
    return source.model_copy(update={"routes": routes})


def _time(policy: Policy, body: dict[str, Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        apply_policy(policy, ROUTE, body)
    return (time.perf_counter() - start) / number


def measure(policy_file: Path, *, rounds: int, number: int) -> list[dict[str, Any]]:
    """One row per body size: median us per request, nested and flat."""
    source, _ = load_policy_file(policy_file)
    nested = Policy(source)
    flat = Policy(without_nested(source))
    rows = []
    for size in SIZES:
        body = chat_body(size)
        for policy in (nested, flat):
            decision = apply_policy(policy, ROUTE, body)
            if decision.error is not None:
                raise SystemExit(f"the bench body is rejected: {decision.error.message}")
        with_rules: list[float] = []
        without: list[float] = []
        for _ in range(rounds):
            with_rules.append(_time(nested, body, number))
            without.append(_time(flat, body, number))
        a, b = statistics.median(with_rules) * 1e6, statistics.median(without) * 1e6
        rows.append(
            {"messages": size, "nested_us": a, "flat_us": b, "added_us": a - b, "ratio": a / b}
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_cost", description=__doc__)
    parser.add_argument("--policy", type=Path, default=ROOT / "policies" / "ft-serve.yaml")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=5000, help="requests per timing")
    args = parser.parse_args(argv)
    rows = measure(args.policy, rounds=args.rounds, number=args.number)
    header = ["messages", "with nested rules us", "top level only us", "added us", "ratio"]
    table = [
        [str(r["messages"])]
        + [format_number(r[k]) for k in ("nested_us", "flat_us", "added_us", "ratio")]
        for r in rows
    ]
    print(f"apply_policy on {ROUTE}, {args.policy.name}: medians of {args.rounds} rounds")
    print(markdown([header, *table]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
