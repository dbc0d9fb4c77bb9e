"""bench/callcount.py: the default path's Python work per request stays at or below the
figures recorded in bench/callcount.json (counts, not times: no flake under load).

When this fails, a change added work per request: make it cheaper, or, if the work is
meant, record the new figures with ``python -m bench.callcount --write`` so the diff
shows what the change costs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from bench.callcount import FIGURES, ROOT, UPDATE, compare, measure
from bench.callcounter import FIGURE_NAMES, KINDS, Counter


def test_no_request_kind_does_more_work_than_recorded(
    figure: Callable[[str, str], None],
) -> None:
    recorded = json.loads(FIGURES.read_text())
    # The least over 20 requests. Every answer fits one loopback segment (the embeddings
    # kind asks for narrow vectors): a 490 KB one was read in a varying number of steps on
    # a loaded machine, and over 5 requests none came whole once (a failure beside a fresh
    # clone's install, 2026-12-01).
    current = measure(ROOT, number=20)
    for kind, counts in current["counts"].items():
        figure(f"callcount {kind}", ", ".join(f"{k} {counts[k]}" for k in FIGURE_NAMES))
    grown, _ = compare(recorded, current)
    assert grown == [], f"more work per request than recorded ({UPDATE} if meant): {grown}"
    assert sorted(current["counts"]) == sorted(kind.name for kind in KINDS)


def _figures(own: int, python: int, *, python_version: str = "3.11.7") -> dict[str, Any]:
    counts = {"own": own, "python": python, "builtin": 10, "opcodes": 100}
    return {"environment": {"python": python_version}, "counts": {"chat json": counts}}


def test_a_count_above_the_recorded_one_is_named() -> None:
    grown, shrunk = compare(_figures(10, 20), _figures(11, 19))
    assert grown == ["chat json: 11 own per request, 10 recorded (+1)"]
    assert shrunk == ["chat json: 19 python per request, 20 recorded (-1)"]


def test_in_another_environment_only_the_own_calls_are_compared() -> None:
    other = _figures(10, 25, python_version="3.12.1")
    assert compare(_figures(10, 20), other) == ([], [])
    assert compare(_figures(10, 20), _figures(12, 20, python_version="3.12.1"))[0] == [
        "chat json: 12 own per request, 10 recorded (+2)"
    ]


def test_a_kind_no_longer_counted_is_a_failure() -> None:
    current = {"environment": {"python": "3.11.7"}, "counts": {}}
    assert compare(_figures(10, 20), current)[0] == ["chat json: not counted"]


def _leaf(n: int) -> int:
    return n + 1


def _caller() -> int:
    return _leaf(1) + _leaf(2) + len("abc")


def test_the_counter_counts_calls_builtins_and_own_functions() -> None:
    counter = Counter(__file__)
    sys.setprofile(counter.profile)
    try:
        _caller()
    finally:
        sys.setprofile(None)
    # _caller, _leaf twice; len; and the setprofile call that ends the count.
    assert (counter.python, counter.own, counter.builtin) == (3, 3, 2)


def test_the_counter_counts_more_bytecodes_for_more_work() -> None:
    def one() -> int:
        return _leaf(1)

    runs = []
    for work in (one, _caller):
        counter = Counter(__file__)
        tracer = sys.gettrace()
        sys.settrace(counter.trace)
        try:
            work()
        finally:
            sys.settrace(tracer)
        runs.append(counter.opcodes)
    assert 0 < runs[0] < runs[1]
