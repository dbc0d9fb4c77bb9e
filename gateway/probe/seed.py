"""The seed check: a seed selects a text, and the same text whatever shares the batch.

Alone: the same seeded request sent three times at temperature 1 gives one text, and
another seed another. Under load (load.py): the same request sent again while other
requests share the engine's batches, at temperature 1 (its text alone) and at
temperature 0 (the baseline's greedy text). The verdict:

- honoured: reproducible under load (a per-row sampler on batch-invariant logits);
- alone only: reproducible alone, and some replays under load differed (a seed keyed
  by the batch, or logits that change with the batch size, whose near-ties flip);
  the verdict's ``rate`` is the share that differed;
- ignored: the same seed alone gave different texts.
"""

from __future__ import annotations

from gateway.probe.context import Probe
from gateway.probe.load import LOAD_MAX_TOKENS, LOAD_REQUESTS, Wave, send_waves
from gateway.probe.sampling import statistical
from gateway.probe.verdict import ALONE_ONLY, IGNORED, INCONCLUSIVE, Trial, Verdict, quote

SEEDS = (1234, 98765, 4242)
ALONE = (SEEDS[0], SEEDS[0], SEEDS[0], SEEDS[1], SEEDS[1])
# Alone (and one more seed when the first two agree), then the load's waves.
REQUESTS = len(ALONE) + 1 + LOAD_REQUESTS


def check_seed(probe: Probe) -> Verdict:
    """Alone, then under load; see the module's docstring."""
    route = probe.route
    fields = [{"temperature": 1.0, "seed": s} for s in ALONE]
    answers, trials, bad = probe.post_each("seed", fields)
    if bad is not None:
        return bad
    texts = [route.text(a) for a in answers]
    for seed in SEEDS[:2]:
        mine = [t for s, t in zip(ALONE, texts, strict=True) if s == seed]
        if len(set(mine)) > 1:
            return Verdict(
                "seed",
                IGNORED,
                f"seed {seed} sent {len(mine)} times at temperature 1 alone gave "
                f"{len(set(mine))} different texts: {quote(mine[0], 40)} and "
                f"{quote(next(t for t in mine if t != mine[0]), 40)}",
                tuple(trials),
            )
    alone = texts[0]
    distinct = {alone, texts[-1]}
    if len(distinct) == 1:
        third = probe.post(temperature=1.0, seed=SEEDS[2])
        trial, bad = probe.judge("seed", third)
        trials.append(trial)
        if bad is not None:
            return bad
        distinct.add(route.text(third))
    if len(distinct) == 1:
        return Verdict(
            "seed",
            INCONCLUSIVE,
            "every seed gave the same text: the seed did not select anything",
            tuple(trials),
        )
    confidence = 1 - probe.baseline.pair_coincidence() ** 2
    waves = send_waves(probe, SEEDS[0])
    for index, wave in enumerate(waves, 1):
        for target in wave.targets:
            trial, bad = probe.judge("seed", target)
            if bad is not None:
                return bad
            trials.append(_under_load(trial, index, wave))
    alone_summary = (
        f"alone, seed {SEEDS[0]} sent 3 times and seed {SEEDS[1]} twice at temperature 1: "
        f"each gave its own text every time ({len(distinct)} different texts)"
    )
    started = sum(w.started_loads for w in waves)
    if started == 0:
        return Verdict(
            "seed",
            INCONCLUSIVE,
            f"{alone_summary}; under load not measured: no load request streamed, so none "
            "was known to be running when the seeded requests were sent",
            tuple(trials),
        )
    hot = [route.text(w.targets[0]) for w in waves]
    hot_differ = sum(t != alone for t in hot)
    greedy = probe.baseline.greedy_text
    cold = [route.text(w.targets[1]) for w in waves] if greedy is not None else []
    cold_differ = sum(t != greedy for t in cold)
    load = (
        f"under load ({len(waves)} waves of {_load_counts(waves)} other requests, up to "
        f"{LOAD_MAX_TOKENS} tokens, unseeded or with other seeds, at temperature 1 and 0)"
    )
    measured = f"at temperature 1, {hot_differ} of {len(hot)} replays differed from the text alone"
    if greedy is not None:
        measured += f"; at temperature 0, {cold_differ} of {len(cold)} from the greedy text"
    else:
        measured += "; temperature 0 not compared (it is not repeatable alone)"
    differ, total = hot_differ + cold_differ, len(hot) + len(cold)
    if differ == 0:
        return statistical(
            "seed",
            confidence,
            f"reproducible under load: {alone_summary}; {load} {measured}",
            trials,
        )
    return Verdict(
        "seed",
        ALONE_ONLY,
        f"reproducible alone only: {alone_summary}; but {load} {measured} (rate {differ}/{total})",
        tuple(trials),
        confidence,
        rate=differ / total,
    )


def _under_load(trial: Trial, index: int, wave: Wave) -> Trial:
    loads = len(wave.loads)
    note = (
        f"under load, wave {index}: {loads} load request{'s' if loads != 1 else ''}, "
        f"{wave.started_loads} streaming"
    )
    return Trial(trial.sent, f"{trial.got}; {note}")


def _load_counts(waves: list[Wave]) -> str:
    counts = [str(len(w.loads)) for w in waves]
    return ", ".join(counts[:-1]) + " and " + counts[-1] if len(counts) > 1 else counts[0]
