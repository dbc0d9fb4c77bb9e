"""What the probe concluded about one field, and the evidence for it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from gateway.probe.client import Answer

HONOURED = "honoured"  # the field had the effect it asks for
ALONE_ONLY = "alone only"  # seed: honoured for a request alone, not under load
IGNORED = "ignored"  # 200 and no effect
REJECTED = "rejected"  # 4xx: the engine refuses the field
BROKEN = "broken"  # 5xx, a hang, or an answer that is not well formed
INCONCLUSIVE = "inconclusive"  # the probe could not tell, and says so
OUTCOMES = (HONOURED, ALONE_ONLY, IGNORED, REJECTED, BROKEN, INCONCLUSIVE)

# The reason a rule that refuses a probed field gives the client, by the verdict.
REFUSED_BECAUSE = {
    IGNORED: "This engine accepts it but ignores it.",
    REJECTED: "This engine does not support it.",
    BROKEN: "This engine fails on it.",
    INCONCLUSIVE: "It has not been verified on this engine.",
}

# Below this, a statistical "honoured" is reported as inconclusive.
MIN_CONFIDENCE = 0.9
_TRIM = 100


@dataclass(frozen=True)
class Trial:
    """One request of the evidence: the fields sent (beyond the base request), what came back."""

    sent: str
    got: str


@dataclass(frozen=True)
class Verdict:
    """A field's outcome, why, and how sure: ``confidence`` is set for statistical tests;
    ``rate``, for seed, is the share of its replays under load that differed."""

    field: str
    outcome: str
    summary: str
    trials: tuple[Trial, ...] = ()
    confidence: float | None = None
    rate: float | None = None


def shown_confidence(confidence: float) -> str:
    """Three decimals, rounded down: 0.9954 shows as 0.995, never as a certain 1.00."""
    return f"{math.floor(confidence * 1000) / 1000:.3f}"


def verdict_line(verdict: Verdict) -> str:
    """``honoured (confidence 0.98): summary``."""
    sure = (
        f" (confidence {shown_confidence(verdict.confidence)})"
        if verdict.confidence is not None
        else ""
    )
    return f"{verdict.outcome}{sure}: {verdict.summary}"


def probed_note(name: str, verdict: Verdict, day: str, *, review: bool = True) -> str:
    """The comment above a probed rule: the verdict on ``name`` and the day, led by
    REVIEW BY HAND where the probe could not tell (unless ``review`` is off)."""
    head = "REVIEW BY HAND. " if review and verdict.outcome == INCONCLUSIVE else ""
    return f"{head}{name}: {verdict_line(verdict)} (probed {day})"


def trim(text: str, limit: int = _TRIM) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(text: str | None, limit: int = 60) -> str:
    """A text as a JSON string, trimmed: newlines and quotes stay visible."""
    if text is None:
        return "null"
    return json.dumps(trim(text, limit), ensure_ascii=False)


def difference(before: str, after: str | None, context: int = 24) -> str:
    """Where ``after`` departs from ``before``, shown as the two texts around that point."""
    if after is None:
        return f"{quote(before, 40)} became no text"
    at = next(
        (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    start = max(0, at - context // 2)
    lead = "…" if start else ""
    return (
        f"{quote(lead + before[start : at + context], context * 2)} became "
        f"{quote(lead + after[start : at + context], context * 2)}"
    )


def compact(value: Any, limit: int = _TRIM) -> str:
    """A JSON value on one line, trimmed."""
    return trim(json.dumps(value, separators=(", ", ": "), ensure_ascii=False), limit)


def failure(field: str, answer: Answer, trial: Trial) -> Verdict | None:
    """The verdict when a request with the field did not get a 2xx, else None."""
    if answer.status is None:
        if answer.error is not None and answer.error.startswith("not sent"):
            return Verdict(field, INCONCLUSIVE, answer.error, (trial,))
        return Verdict(field, BROKEN, f"no answer: {answer.error}", (trial,))
    if 400 <= answer.status < 500:
        return Verdict(
            field,
            REJECTED,
            f"HTTP {answer.status}: {trim(answer.engine_message(), 160)}",
            (trial,),
        )
    if answer.status >= 500 or not answer.ok:
        return Verdict(
            field,
            BROKEN,
            f"HTTP {answer.status}: {trim(answer.engine_message(), 160)}",
            (trial,),
        )
    return None
