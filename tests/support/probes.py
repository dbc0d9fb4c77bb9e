"""A probe of the toy engine, and a probe's result read back, for the probe's tests."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from gateway.probe.client import EngineClient
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import ProbeResult, planned_requests, probe_engine
from gateway.probe.verdict import Verdict
from tests.support.toyengine import ToyEngine

BOTH = [CHAT, COMPLETIONS]
DAY = date(2026, 11, 29)


def run_probe(
    toy: ToyEngine,
    routes: list[str] = BOTH,
    *,
    max_requests: int | None = None,
    extra: dict[str, Any] | None = None,
) -> ProbeResult:
    """A probe of ``toy`` through its mock transport, dated DAY (``max_requests``: the
    probe's own plan unless given)."""
    budget = planned_requests(routes) if max_requests is None else max_requests
    with EngineClient(
        "http://toy", transport=toy.transport, timeout=1, max_requests=budget
    ) as client:
        return probe_engine(
            client, upstream="http://toy", model="toy", routes=routes, extra=extra, today=DAY
        )


def outcomes(result: ProbeResult, route: str) -> dict[str, str]:
    """Each probed field's outcome on ``route``, which was probed without an error."""
    found = result.route(route)
    assert found is not None and found.error is None
    return {v.field: v.outcome for v in found.verdicts}


def verdict(result: ProbeResult, route: str, field: str) -> Verdict:
    """The verdict on ``field`` of ``route``."""
    found = result.route(route)
    assert found is not None
    v = found.verdict(field)
    assert v is not None
    return v


def comments(policy_text: str) -> str:
    """A written policy with each wrapped comment on one line, to search in."""
    return re.sub(r"\n *#   ", " ", policy_text)
