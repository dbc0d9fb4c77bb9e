"""What the probe of a route an engine may serve natively (/v1/responses, /v1/messages)
found, and how one field tried on the engine's own route is judged."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field

from gateway.probe.client import Answer
from gateway.probe.verdict import BROKEN, HONOURED, IGNORED, REJECTED, Trial, Verdict, trim
from gateway.probe.yamltext import comment


@dataclass
class NativeProbe:
    """Whether the engine serves the route itself, and its verdicts there."""

    native: bool
    detail: str  # the plain request's answer, in words
    verdicts: list[Verdict] = field(default_factory=list)

    def verdict(self, name: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.field == name), None)


def route_head(path: str, found: NativeProbe, day: str, setting: str) -> list[str]:
    """The head of such a route's rules in the written policy: its path, what the engine's
    own route answered, and the mode (``upstream.<setting>``) to run the gateway with."""
    mode = "native" if found.native else "translate"
    lines = [f"  {path}:"]
    lines += comment(
        f"The engine's own {path} (probed {day}): {found.detail}. Run the gateway with "
        f"upstream.{setting}: {mode}.",
        "    ",
    )
    return [*lines, "    fields:"]


def describe(answer: Answer) -> str:
    """An answer in words: its status, and an error's message."""
    if answer.status is None:
        return f"no answer: {answer.error}"
    if not answer.ok:
        return f"HTTP {answer.status}: {trim(answer.engine_message(), 100)}"
    return f"HTTP {answer.status}"


def judged(
    name: str, answer: Answer, honoured: bool, what: str, *, leave_out: Collection[str]
) -> Verdict:
    """The verdict on field ``name`` from the engine's ``answer`` (``honoured``: it did
    ``what``); the evidence shows the fields sent but those in ``leave_out``."""
    sent = {k: v for k, v in answer.sent.items() if k not in leave_out}
    trial = (Trial(json.dumps(sent)[:160], describe(answer)),)
    if answer.status is None or (answer.status or 0) >= 500:
        return Verdict(name, BROKEN, f"the engine failed on it ({describe(answer)})", trial)
    if not answer.ok:
        return Verdict(name, REJECTED, f"the engine refused it ({describe(answer)})", trial)
    if honoured:
        return Verdict(name, HONOURED, what, trial)
    return Verdict(name, IGNORED, f"200 without the effect: {what} did not happen", trial)
