"""The seed check against the reference engine in each of its four modes: the verdict
is right every time (the load's waves are batched for certain by the engine's gate),
and the written policy carries it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from starlette.applications import Starlette

from gateway.policy.loading import parse_policy_text
from gateway.probe.client import EngineClient
from gateway.probe.context import Baseline, Probe
from gateway.probe.route import CHAT, COMPLETIONS, ProbeRoute
from gateway.probe.runner import ProbeResult, RouteResult
from gateway.probe.seed import REQUESTS, check_seed
from gateway.probe.verdict import ALONE_ONLY, HONOURED, IGNORED, Verdict
from gateway.probe.writer import render_policy
from refengine import create_app as create_engine
from tests.support.batchgate import wave_gate
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.probes import comments
from tests.support.servers import ServerThread

MODES: dict[str, dict[str, Any]] = {
    "patched": {},
    "per-batch seed": {"seed_mode": "per-batch"},
    "batch-variant logits": {"batch_variant_logits": True},
    "unpatched": {"unpatched_sampler": True},
}
EXPECTED = {
    "patched": HONOURED,
    "per-batch seed": ALONE_ONLY,
    "batch-variant logits": ALONE_ONLY,
    "unpatched": IGNORED,
}


def judge_seed(app: Starlette, url: str, route: str, extra: dict[str, Any]) -> tuple[Verdict, int]:
    """The seed check alone (after the baseline it needs), and the requests it sent."""
    with EngineClient(url, timeout=30) as client:
        probe = Probe(client, ProbeRoute(route, MODEL, extra), before_wave=wave_gate(app))
        probe.measure_baseline()
        before = client.sent
        found = check_seed(probe)
        return found, client.sent - before


@pytest.fixture(scope="module", params=list(MODES))
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[str, Starlette, str]]:
    app = create_engine(**MODES[request.param])
    with ServerThread(app) as server:
        yield request.param, app, server.url


def check_verdict(mode: str, found: Verdict, sent: int) -> None:
    """The verdict the reference engine in ``mode`` must get, with its evidence."""
    assert found.outcome == EXPECTED[mode], found.summary
    assert sent <= REQUESTS
    if found.outcome == ALONE_ONLY:
        assert found.rate is not None and 0 < found.rate <= 1
        assert f"rate {round(found.rate * 6)}/6" in found.summary
    if mode == "batch-variant logits":
        # The near-ties flip at temperature 0 too, not only under sampling noise.
        assert "at temperature 0, 0 of" not in found.summary
    if mode == "per-batch seed":
        # At temperature 0 the draw does not matter: only the sampled replays differ.
        assert "at temperature 0, 0 of 3" in found.summary


def test_the_seed_verdict_is_right_every_time(engine: tuple[str, Starlette, str]) -> None:
    mode, app, url = engine
    # Twice per mode in the default suite (the slow test below runs 40 more).
    for route, extra in ((CHAT, NO_THINKING), (COMPLETIONS, {})):
        check_verdict(mode, *judge_seed(app, url, route, extra))


@pytest.mark.slow
@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_the_seed_verdict_is_right_over_many_runs(
    engine: tuple[str, Starlette, str], route: str
) -> None:
    mode, app, url = engine
    for extra in (NO_THINKING, {}):  # thinking off, and on (chat)
        for _ in range(10):
            check_verdict(mode, *judge_seed(app, url, route, extra))


def _result(found: Verdict) -> ProbeResult:
    result = ProbeResult("http://engine", MODEL, date(2026, 12, 1), {})
    result.routes.append(RouteResult(COMPLETIONS, [found], Baseline([], [])))
    return result


ALONE = Verdict(
    "seed",
    ALONE_ONLY,
    "reproducible alone only: ... (rate 2/6)",
    confidence=0.98,
    rate=2 / 6,
)


@pytest.mark.parametrize(
    ("found", "choice", "guarantee", "action"),
    [
        (ALONE, "pass", "alone_only", "pass"),
        (ALONE, "reject", "alone_only", "reject"),
        (Verdict("seed", HONOURED, "under load", confidence=0.98), "reject", "under_load", "pass"),
        (Verdict("seed", IGNORED, "differed alone"), "pass", "ignored", "reject"),
    ],
)
def test_the_written_policy_carries_the_seed_verdict(
    found: Verdict, choice: str, guarantee: str, action: str
) -> None:
    text = render_policy(_result(found), seed_under_load=choice)
    policy = parse_policy_text(text)  # what ft-gateway check accepts
    route = policy.routes[COMPLETIONS]
    assert route.guarantees.seed == guarantee
    seed = route.fields["seed"]
    assert seed.action == action
    notes = comments(text)
    assert f"seed: {found.outcome}" in notes
    if found.outcome == ALONE_ONLY and choice == "reject":
        assert seed.reason is not None and "under load 33% of seeded replays" in seed.reason
        assert "refused with a 400 (--seed-under-load reject)" in notes
    if found.outcome == ALONE_ONLY and choice == "pass":
        assert "passed as best effort, as OpenAI's own seed is" in notes


def test_the_operator_choice_is_checked() -> None:
    with pytest.raises(ValueError, match="seed_under_load"):
        render_policy(_result(ALONE), seed_under_load="maybe")
