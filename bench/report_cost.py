"""What report-only rules cost a request they do not touch: Python calls, then time.

``python -m bench.report_cost [--baseline DIR] [--rounds N] [--number N]``

Python calls per ``apply_policy`` (a count: the same on any machine, under any
load) for typical bodies under the shipped policy, and under the same policy
with a report-only rule the body does not touch (a profile whose ``logprobs``
only reports, and a policy whose every rule only reports). With ``--baseline``
(or ``$FT_BENCH_BASELINE``: a checkout from before the change), the same count
runs on that tree in a process of its own, so old and new are one table. Then
medians of interleaved timings, which mean something only on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHAT, COMPLETIONS, RESPONSES = "/v1/chat/completions", "/v1/completions", "/v1/responses"
MODEL = "Qwen3.8-Flash-Next"
TRIAL = {"routes": {CHAT: {"fields": {"logprobs": {"enforcement": "report"}}}}}


def bodies() -> dict[str, tuple[str, dict[str, Any]]]:
    """Request bodies as clients send them, by name: (route, body)."""
    system = {"role": "system", "content": "You are a helpful assistant."}
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: tell me more."}
        for i in range(9)
    ]
    return {
        "chat, 2 messages": (
            CHAT,
            {"model": MODEL, "messages": [system, turns[0]], "temperature": 0.7, "stream": True},
        ),
        "chat, 10 messages": (CHAT, {"model": MODEL, "messages": [system, *turns]}),
        "completions": (COMPLETIONS, {"model": MODEL, "prompt": "Once upon", "max_tokens": 16}),
        "responses": (RESPONSES, {"model": MODEL, "input": "Hi.", "max_output_tokens": 16}),
    }


# Runs in the tree measured (this one, or the baseline's): prints {name: calls}.
COUNT = r"""
import json, sys
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
cases = json.loads(sys.argv[1])
policy = Policy(parse_policy_text(open(sys.argv[2]).read()))
counted = [0]
def count(frame, event, arg):
    if event == "call":
        counted[0] += 1
out = {}
for name, (route, body, profile) in cases.items():
    apply_policy(policy, route, body, profile=profile)  # compiled and cached first
    counted[0] = 0
    sys.setprofile(count)
    apply_policy(policy, route, body, profile=profile)
    sys.setprofile(None)
    out[name] = counted[0]
print(json.dumps(out))
"""


def variants(policy_text: str) -> dict[str, str]:
    """The policy as shipped; with a profile whose logprobs only reports; all reporting."""
    import yaml

    data = yaml.safe_load(policy_text)
    with_profile = {**data, "profiles": {**data.get("profiles", {}), "trial": TRIAL}}
    return {
        "shipped": policy_text,
        "report-only profile": yaml.safe_dump(with_profile),
        "whole policy report-only": yaml.safe_dump({**data, "enforcement": "report"}),
    }


def count_calls(tree: Path, policy_text: str, *, profile: str | None) -> dict[str, int]:
    """Python calls per apply_policy in ``tree``, for each body."""
    cases = {name: (route, body, profile) for name, (route, body) in bodies().items()}
    policy = Path(os.environ.get("TMPDIR", "/tmp")) / f"report-cost-{os.getpid()}.yaml"
    policy.write_text(policy_text)
    try:
        done = subprocess.run(
            [sys.executable, "-c", COUNT, json.dumps(cases), str(policy)],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        policy.unlink()
    counts: dict[str, int] = json.loads(done.stdout)
    return counts


def _time(policy: Any, route: str, body: dict[str, Any], profile: str | None, n: int) -> float:
    from gateway.policy.engine import apply_policy

    start = time.perf_counter()
    for _ in range(n):
        apply_policy(policy, route, body, profile=profile)
    return (time.perf_counter() - start) / n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report_cost", description=__doc__)
    parser.add_argument("--baseline", type=Path, default=os.environ.get("FT_BENCH_BASELINE"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=3000, help="requests per timing")
    args = parser.parse_args(argv)
    shipped = (ROOT / "policies" / "ft-serve.yaml").read_text()
    trees = {"new": ROOT}
    if args.baseline is not None:
        trees = {"old": Path(args.baseline).resolve(), **trees}
    print("Python calls per apply_policy (deterministic)")
    print(
        "| body | " + " | ".join(f"{t}: shipped" for t in trees) + " | new: report-only "
        "profile | new: whole policy report-only |"
    )
    print("|---" * (len(trees) + 3) + "|")
    counts = {t: count_calls(path, shipped, profile=None) for t, path in trees.items()}
    texts = variants(shipped)
    trial = count_calls(ROOT, texts["report-only profile"], profile="trial")
    whole = count_calls(ROOT, texts["whole policy report-only"], profile=None)
    for name in bodies():
        row = [str(counts[t][name]) for t in trees] + [str(trial[name]), str(whole[name])]
        print(f"| {name} | " + " | ".join(row) + " |")

    from gateway.policy.engine import Policy
    from gateway.policy.loading import parse_policy_text

    policies = {
        "shipped": (Policy(parse_policy_text(texts["shipped"])), None),
        "report-only profile": (Policy(parse_policy_text(texts["report-only profile"])), "trial"),
    }
    print(
        f"\nmicroseconds per apply_policy, medians of {args.rounds} interleaved rounds "
        "(meaningful on an idle machine only)"
    )
    print("| body | shipped | report-only profile |\n|---|---|---|")
    for name, (route, body) in bodies().items():
        times: dict[str, list[float]] = {k: [] for k in policies}
        for _ in range(args.rounds):
            for key, (policy, profile) in policies.items():
                times[key].append(_time(policy, route, body, profile, args.number))
        cells = [f"{statistics.median(times[k]) * 1e6:.2f}" for k in policies]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
