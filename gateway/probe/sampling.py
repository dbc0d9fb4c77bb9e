"""Checks of the fields that steer sampling: temperature, the filters, the penalties
and logit_bias (seed has its own module, seed.py). They compare texts: with the greedy
(temperature 0) text where the effect is deterministic, and with the baseline's free
samples where it is statistical.

A statistical "honoured" carries a confidence: one minus the chance, estimated from
the free samples, that an engine ignoring the field would have shown the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.probe.context import Probe
from gateway.probe.verdict import (
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    MIN_CONFIDENCE,
    Trial,
    Verdict,
    difference,
    quote,
    shown_confidence,
)

# +100 makes the token win every greedy step on an engine that applies the bias.
BIAS_TOKEN_IDS = ("100", "200")
FILTERS = {"top_k": 1, "top_p": 0.001, "min_p": 1.0}  # each leaves only the likeliest token
PENALTIES = {
    "presence_penalty": (2.0, -2.0),
    "frequency_penalty": (2.0, -2.0),
    "repetition_penalty": (2.0, 0.5),
}

_NEEDS_GREEDY = "needs a repeatable temperature-0 text, which this engine did not give"


def statistical(field: str, confidence: float, summary: str, trials: list[Trial]) -> Verdict:
    if confidence < MIN_CONFIDENCE:
        summary += f"; but that could be chance (confidence {shown_confidence(confidence)})"
        return Verdict(field, INCONCLUSIVE, summary, tuple(trials), confidence)
    return Verdict(field, HONOURED, summary, tuple(trials), confidence)


def check_temperature(probe: Probe) -> Verdict:
    """temperature 0 is repeatable, where temperature 1 is not."""
    base, route = probe.baseline, probe.route
    trials = [route.trial(a) for a in base.greedy] + [route.trial(a) for a in base.free[:2]]
    texts = base.greedy_texts
    if any(t is None for t in texts):
        return Verdict(
            "temperature", INCONCLUSIVE, "some temperature-0 requests failed", tuple(trials)
        )
    if base.greedy_text is None:
        distinct = len(set(texts))
        return Verdict(
            "temperature",
            IGNORED,
            f"temperature 0 sent {len(texts)} times gave {distinct} different texts",
            tuple(trials),
        )
    if base.free_distinct <= 1:
        return Verdict(
            "temperature",
            INCONCLUSIVE,
            "temperature 0 is repeatable, but so is temperature 1: no randomness to remove",
            tuple(trials),
        )
    # Three free samples agree with probability sum(p^3) <= (sum(p^2))^1.5.
    confidence = 1 - base.pair_coincidence() ** 1.5
    summary = (
        f"temperature 0 sent {len(texts)} times gave the same text; temperature 1 gave "
        f"{base.free_distinct} different texts in {len(base.free)}"
    )
    return statistical("temperature", confidence, summary, trials)


def check_filter(probe: Probe, field: str) -> Verdict:
    """At its extreme setting the filter leaves one token per step: temperature 1 turns greedy."""
    value = FILTERS[field]
    route, base = probe.route, probe.baseline
    answers, trials, bad = probe.post_each(field, [{"temperature": 1.0, field: value}] * 3)
    if bad is not None:
        return bad
    texts = [route.text(a) for a in answers]
    greedy = base.greedy_text
    said = f"{field} {value} at temperature 1"
    # The chance that an engine ignoring the field shows what a greedy one would.
    if greedy is not None:
        differ = sum(t != greedy for t in texts)
        ignored = f"{differ} of 3 texts differ from the temperature-0 text" if differ else None
        same, chance = "all 3 texts equal the temperature-0 text", base.greedy_match() ** 3
    else:
        ignored = "the 3 texts differ" if len(set(texts)) > 1 else None
        same, chance = "the 3 texts are the same", base.pair_coincidence() ** 1.5
    if ignored is not None:
        return Verdict(field, IGNORED, f"{said}: {ignored}", tuple(trials))
    return statistical(field, 1 - chance, f"{said}: {same}", trials)


def _changes_greedy(
    probe: Probe,
    field: str,
    tries: list[tuple[str, dict[str, Any]]],
    unchanged: Callable[[str], str],
) -> Verdict:
    """Honoured at the first of ``tries`` (how it is named, the fields it sends) whose
    temperature-0 text is not the greedy one; ignored, saying ``unchanged(greedy)``,
    when none is."""
    greedy = probe.baseline.greedy_text
    if greedy is None:
        return Verdict(field, INCONCLUSIVE, _NEEDS_GREEDY)
    trials: list[Trial] = []
    for said, fields in tries:
        answer = probe.post(temperature=0, **fields)
        trial, bad = probe.judge(field, answer)
        trials.append(trial)
        if bad is not None:
            return bad
        text = probe.route.text(answer)
        if text != greedy:
            return Verdict(
                field,
                HONOURED,
                f"{said} changed the temperature-0 text: {difference(greedy, text)}",
                tuple(trials),
            )
    return Verdict(field, IGNORED, unchanged(quote(greedy, 40)), tuple(trials))


def check_penalty(probe: Probe, field: str) -> Verdict:
    """An extreme penalty changes the greedy text (tried in both directions)."""
    tries = [(f"{field} {value}", {field: value}) for value in PENALTIES[field]]
    shown = " nor ".join(str(v) for v in PENALTIES[field])
    return _changes_greedy(
        probe,
        field,
        tries,
        lambda greedy: f"neither {field} {shown} changed the temperature-0 text {greedy}",
    )


def check_logit_bias(probe: Probe) -> Verdict:
    """A +100 bias on a token makes it win every greedy step: the text changes."""
    tries = [(f"+100 on token {token}", {"logit_bias": {token: 100}}) for token in BIAS_TOKEN_IDS]
    return _changes_greedy(
        probe,
        "logit_bias",
        tries,
        lambda greedy: (
            f"+100 on token {' or '.join(BIAS_TOKEN_IDS)} left the temperature-0 "
            f"text {greedy} unchanged"
        ),
    )
