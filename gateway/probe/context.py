"""What every check shares: the client, the route, and the baseline answers.

The baseline is the plain request sent a few times at temperature 0 (the
greedy text, which the deterministic checks compare against) and at
temperature 1 without a seed (how often two free samples agree by chance,
which the statistical checks turn into a confidence).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.probe.client import Answer, EngineClient
from gateway.probe.route import ProbeRoute
from gateway.probe.verdict import BROKEN, Trial, Verdict, failure, trim

GREEDY_SAMPLES = 3
FREE_SAMPLES = 4

# Called before each wave of the seed check's load with its group sizes (load.py).
BeforeWave = Callable[[tuple[int, ...]], None]


class ProbeError(Exception):
    """The engine did not answer the plain request: there is nothing to measure."""


@dataclass
class Baseline:
    """The plain request's answers at temperature 0 and at temperature 1."""

    greedy: list[Answer]
    free: list[Answer]
    greedy_texts: list[str | None] = field(default_factory=list)
    free_texts: list[str | None] = field(default_factory=list)

    @property
    def greedy_text(self) -> str | None:
        """The temperature-0 text when every temperature-0 request gave the same one."""
        texts = self.greedy_texts
        if not texts or texts[0] is None or any(t != texts[0] for t in texts):
            return None
        return texts[0]

    @property
    def free_distinct(self) -> int:
        return len({t for t in self.free_texts if t is not None})

    def pair_coincidence(self) -> float:
        """Chance that two free samples agree, estimated with add-one smoothing."""
        texts = [t for t in self.free_texts if t is not None]
        pairs = list(itertools.combinations(texts, 2))
        same = sum(a == b for a, b in pairs)
        return (same + 1) / (len(pairs) + 2)

    def greedy_match(self) -> float:
        """Chance that a free sample equals the greedy text, estimated with add-one smoothing."""
        texts = [t for t in self.free_texts if t is not None]
        same = sum(t == self.greedy_text for t in texts)
        return (same + 1) / (len(texts) + 2)


@dataclass
class Probe:
    """One route of one engine, with its baseline once ``measure_baseline`` has run."""

    client: EngineClient
    route: ProbeRoute
    baseline: Baseline = field(default_factory=lambda: Baseline([], []))
    # Answers more than one check compares against, by name, sent by the first.
    references: dict[str, Answer] = field(default_factory=dict)
    before_wave: BeforeWave | None = None

    def post(self, **fields: Any) -> Answer:
        """The base request with ``fields``, non-streaming."""
        return self.client.post(self.route.path, self.route.body(**fields))

    def stream(self, **fields: Any) -> Answer:
        """The base request with ``fields``, read as an event stream."""
        return self.client.stream(self.route.path, self.route.body(**fields))

    def reference(self, name: str, **fields: Any) -> Answer:
        """The base request with ``fields``, sent once: later checks read it back from
        ``references`` (and send nothing) under the same ``name``."""
        answer = self.references.get(name)
        if answer is None:
            answer = self.references[name] = self.post(**fields)
        return answer

    def revive(self) -> bool:
        """After time-outs in a row, one plain request: True if the engine answers again."""
        answer = self.client.post(self.route.path, self.route.body(temperature=0), force=True)
        return answer.status is not None

    def judge(
        self, field: str, answer: Answer, *, counted: bool = False
    ) -> tuple[Trial, Verdict | None]:
        """The answer's evidence, and a verdict if it failed or a 200 came without a text.
        ``counted``: the evidence shows the prompt tokens (see ProbeRoute.trial)."""
        trial = self.route.trial(answer, counted=counted)
        bad = failure(field, answer, trial)
        if bad is None and answer.events is None and self.route.text(answer) is None:
            bad = Verdict(
                field,
                BROKEN,
                f"HTTP 200 without a text in choices[0]: {trim(answer.raw)}",
                (trial,),
            )
        return trial, bad

    def post_each(
        self, field: str, requests: list[dict[str, Any]], *, counted: bool = False
    ) -> tuple[list[Answer], list[Trial], Verdict | None]:
        """Send each request in turn, stopping at the first that fails (its verdict)."""
        answers: list[Answer] = []
        trials: list[Trial] = []
        for fields in requests:
            answer = self.post(**fields)
            answers.append(answer)
            trial, bad = self.judge(field, answer, counted=counted)
            trials.append(trial)
            if bad is not None:
                return answers, trials, bad
        return answers, trials, None

    def measure_baseline(self) -> None:
        """Send the plain request; ProbeError if the engine does not answer it."""
        first = self.client.post(self.route.path, self.route.body(temperature=0), force=True)
        if not first.ok or self.route.text(first) is None:
            what = (
                f"HTTP {first.status}: {first.engine_message()}"
                if first.status is not None
                else first.error
            )
            raise ProbeError(
                f"the engine did not answer the plain request to {self.route.path} "
                f"(model {self.route.model!r}): {what}"
            )
        greedy = [first] + [self.post(temperature=0) for _ in range(GREEDY_SAMPLES - 1)]
        free = [self.post(temperature=1.0) for _ in range(FREE_SAMPLES)]
        self.baseline = Baseline(
            greedy=greedy,
            free=free,
            greedy_texts=[self.route.text(a) if a.ok else None for a in greedy],
            free_texts=[self.route.text(a) if a.ok else None for a in free],
        )
