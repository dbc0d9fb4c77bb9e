"""The seed check's load: the same seeded requests sent while others share the batches.

A wave is a few load requests (streams, longer than the probe's requests, of varied
prompt lengths; unseeded or with other seeds; at temperature 1 and 0), sent at once;
once each has started streaming (it is in the engine), the wave's two targets are sent
together: the seeded request at temperature 1 and at temperature 0. The loads are
still generating while the targets are, so on an engine with continuous batching the
targets share their batches with them, behind them. A wave is bounded: its requests
are counted up front, each has the client's time-out, and the loads stop at
``LOAD_MAX_TOKENS``.

``Probe.before_wave`` (for tests) is called with the wave's group sizes (loads, then
targets) before anything is sent: the reference engine's batcher can hold its steps
until each group has arrived (``Engine.gather``), so the batching is certain there,
not a matter of timing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gateway.probe.client import Answer, BudgetSpent
from gateway.probe.context import Probe

# A seed per load (None: unseeded), its temperature and prompt; three waves of 1, 2
# and 3 loads, so the targets meet three batch sizes.
_SHORT, _MEDIUM = "Lists.", "Describe how a dictionary stores its keys and values."
_LONG = (
    "Explain, step by step and with an example, what happens when a for loop runs "
    "over a list while the body of the loop appends to the same list."
)
LOAD_WAVES: tuple[tuple[tuple[int | None, float, str], ...], ...] = (
    ((None, 1.0, _LONG),),
    ((777, 1.0, _SHORT), (None, 0.0, _MEDIUM)),
    ((None, 1.0, _MEDIUM), (31337, 0.0, _LONG), (98765, 1.0, _SHORT)),
)
TARGET_TEMPERATURES = (1.0, 0.0)
LOAD_MAX_TOKENS = 48
LOAD_REQUESTS = sum(len(w) + len(TARGET_TEMPERATURES) for w in LOAD_WAVES)


@dataclass
class Wave:
    """One wave's answers: the targets in TARGET_TEMPERATURES order, and the loads."""

    targets: list[Answer]
    loads: list[Answer]
    started_loads: int  # loads that were streaming (an event had come) when targets went


def send_waves(probe: Probe, seed: int) -> list[Wave]:
    """Send every wave in turn; the targets carry ``seed``."""
    waves = []
    with ThreadPoolExecutor(max_workers=max(len(w) for w in LOAD_WAVES) + 2) as pool:
        for loads in LOAD_WAVES:
            client = probe.client
            size = len(loads) + len(TARGET_TEMPERATURES)
            if client.sent + size > client.max_requests:  # never half a wave
                raise BudgetSpent(f"the request budget ({client.max_requests}) is spent")
            if probe.before_wave is not None:
                probe.before_wave((len(loads), len(TARGET_TEMPERATURES)))
            waves.append(_wave(probe, pool, loads, seed))
    return waves


def _wave(
    probe: Probe,
    pool: ThreadPoolExecutor,
    loads: tuple[tuple[int | None, float, str], ...],
    seed: int,
) -> Wave:
    route, client = probe.route, probe.client
    load_answers = []
    futures = []
    for load_seed, temperature, prompt in loads:
        body = _load_body(probe, load_seed, temperature, prompt)
        answer = Answer(sent=body)
        load_answers.append(answer)
        futures.append(pool.submit(client.stream, route.path, body, answer=answer))
    for answer in load_answers:
        answer.started.wait(client.timeout)
    streaming = sum(1 for a in load_answers if a.events)
    targets = [
        pool.submit(probe.post, temperature=temperature, seed=seed)
        for temperature in TARGET_TEMPERATURES
    ]
    return Wave([f.result() for f in targets], [f.result() for f in futures], streaming)


def _load_body(probe: Probe, seed: int | None, temperature: float, prompt: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"temperature": temperature, "max_tokens": LOAD_MAX_TOKENS}
    if seed is not None:
        fields["seed"] = seed
    if probe.route.is_chat:
        fields["messages"] = [{"role": "user", "content": prompt}]
    else:
        fields["prompt"] = prompt
    return probe.route.body(stream=True, **fields)
