"""The probe below the field: which JSON-Schema keywords an engine's JSON mode honours.

A table of cases, one a keyword (and one per context where engines differ: a bound on
an integer and on a number, a length alone and beside a pattern or a format, each
format value, ``required`` with and without ``properties``). Each case is a schema
built so that an answer drawn without the keyword breaks it, sent as the value ``v``
of a strict object (OpenAI's strict mode wants an object at the root), ``SAMPLES``
times at temperature 1 with a different seed each. The reading: each answer that
finished (``finish_reason`` stop) and parses is judged on ``v`` alone against the
case's schema (the validator the gateway's answer checks use), so a keyword is
blamed only for what it asks. Verdicts: honoured (no answer broke it), ignored (some
did: the count and the rate), rejected (the engine's 4xx), broken (a 5xx, no answer,
or text that is not JSON with ``finish_reason: "stop"``), inconclusive (answers all cut
by max_tokens, or a control that cannot tell). An honoured keyword gets a control:
the same schema without the keyword, ``CONTROL_SAMPLES`` times; if those answers keep
it too, the test could not tell (inconclusive), else the confidence is one minus the
estimated chance that an engine ignoring it would have kept it in every sample.
A plain schema goes first (the gate): an engine that refuses json_schema, or ignores
it, gets that verdict on every case without the corpus sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.probe.client import Answer
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    MIN_CONFIDENCE,
    Trial,
    Verdict,
    compact,
    failure,
    quote,
)
from gateway.schemas.validator import validator

SAMPLES = 8
CONTROL_SAMPLES = 4
MAX_TOKENS = 128
PROMPT = "Answer in JSON, following the schema."
SEED = 4100  # sample i is sent with seed SEED + i
CONTROL_SEED = 4600  # control i with CONTROL_SEED + i: not the samples' draws again

# A case's context, as the policy's keyword rules narrow a verdict
# (docs/structured-outputs.md, "A keyword's verdict").
TYPES, BESIDE, WITHOUT, VALUES = "types", "beside", "without", "values"
FORMATS = ("date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid")

_INT: dict[str, Any] = {"type": "integer"}
_DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
_AB = {"type": "object", "properties": {"a": _INT, "b": _INT}, "additionalProperties": False}
# b and c each appear half the time where nothing requires them: both, a quarter.
_ABC = {
    "type": "object",
    "properties": {"a": _INT, "b": _INT, "c": _INT},
    "additionalProperties": False,
}
_IF = {
    "type": "integer",
    "minimum": 0,
    "maximum": 9,
    "if": {"minimum": 5},
    "then": {"multipleOf": 5},
    "else": {"const": 0},
}


@dataclass(frozen=True)
class KeywordCase:
    """One keyword (in one context) and the schema of ``v`` that tests it."""

    keyword: str
    schema: dict[str, Any]
    context: tuple[str, str] | None = None  # (TYPES, "number"), (BESIDE, "pattern"), ...

    @property
    def name(self) -> str:
        """``maxLength``, ``minimum on number``, ``minLength beside pattern``, ``format
        email``, ``required without properties``."""
        if self.context is None:
            return self.keyword
        kind, what = self.context
        word = {TYPES: "on", BESIDE: "beside", WITHOUT: "without", VALUES: ""}[kind]
        return f"{self.keyword} {word} {what}".replace("  ", " ")

    def without_keyword(self) -> dict[str, Any]:
        """The control: the schema with the keyword taken out where the case puts it."""
        return _strip(self.schema, self.keyword)


def _strip(schema: dict[str, Any], keyword: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != keyword}


def _bounds(keyword: str, value: Any) -> list[KeywordCase]:
    return [
        KeywordCase(keyword, {"type": "integer", keyword: value}),
        KeywordCase(keyword, {"type": "number", keyword: value}, (TYPES, "number")),
    ]


CASES: tuple[KeywordCase, ...] = (
    KeywordCase("type", {"type": "integer"}),
    KeywordCase("enum", {"type": "string", "enum": ["red", "green"]}),
    KeywordCase("const", {"const": "fixed"}),
    KeywordCase("properties", {"type": "object", "properties": {"n": _INT}, "required": ["n"]}),
    KeywordCase("required", _AB | {"required": ["a", "b"]}),
    KeywordCase("required", {"type": "object", "required": ["a", "b"]}, (WITHOUT, "properties")),
    KeywordCase("additionalProperties", {"type": "object", "additionalProperties": False}),
    KeywordCase("items", {"type": "array", "items": _INT, "minItems": 3}),
    KeywordCase(
        "prefixItems",
        {"type": "array", "prefixItems": [_INT, {"type": "string"}], "minItems": 2, "maxItems": 2},
    ),
    KeywordCase("minItems", {"type": "array", "items": _INT, "minItems": 5}),
    KeywordCase("maxItems", {"type": "array", "items": _INT, "minItems": 1, "maxItems": 1}),
    KeywordCase(
        "uniqueItems",
        {
            "type": "array",
            "items": {"enum": [1, 2, 3]},
            "minItems": 3,
            "maxItems": 3,
            "uniqueItems": True,
        },
    ),
    KeywordCase("anyOf", {"anyOf": [_INT, {"type": "boolean"}]}),
    KeywordCase("oneOf", {"oneOf": [_INT, {"type": "boolean"}]}),
    KeywordCase("allOf", {"allOf": [_INT, {"minimum": 10, "maximum": 12}]}),
    KeywordCase("$ref", {"$defs": {"n": _INT}, "$ref": "#/$defs/n"}),
    KeywordCase("pattern", {"type": "string", "pattern": "^[0-9]{4}$"}),
    *(KeywordCase("format", {"type": "string", "format": f}, (VALUES, f)) for f in FORMATS),
    KeywordCase("minLength", {"type": "string", "minLength": 60}),
    KeywordCase("maxLength", {"type": "string", "maxLength": 3}),
    KeywordCase(
        "minLength", {"type": "string", "pattern": "^[a-z]+$", "minLength": 5}, (BESIDE, "pattern")
    ),
    KeywordCase(
        "maxLength", {"type": "string", "pattern": "^[a-z]+$", "maxLength": 2}, (BESIDE, "pattern")
    ),
    KeywordCase(
        "maxLength", {"type": "string", "format": "email", "maxLength": 5}, (BESIDE, "format")
    ),
    *_bounds("minimum", 5000),
    *_bounds("maximum", -5000),
    *_bounds("exclusiveMinimum", 5000),
    *_bounds("exclusiveMaximum", -5000),
    KeywordCase("multipleOf", {"type": "integer", "multipleOf": 7}),
    KeywordCase("multipleOf", {"type": "number", "multipleOf": 0.5}, (TYPES, "number")),
    KeywordCase("minProperties", {"type": "object", "minProperties": 5}),
    KeywordCase(
        "maxProperties",
        {"type": "object", "properties": {"a": _INT, "b": _INT, "c": _INT}, "maxProperties": 1},
    ),
    KeywordCase(
        "patternProperties",
        {
            "type": "object",
            "patternProperties": {"^n_": _INT},
            "additionalProperties": False,
            "minProperties": 1,
        },
    ),
    KeywordCase(
        "propertyNames",
        {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"}, "minProperties": 2},
    ),
    KeywordCase("not", {"type": "integer", "minimum": 0, "maximum": 3, "not": {"enum": [1, 2, 3]}}),
    KeywordCase("if", _IF),
    KeywordCase("then", _IF),
    KeywordCase("else", _IF),
    KeywordCase(
        "dependentRequired", _ABC | {"required": ["a"], "dependentRequired": {"a": ["b", "c"]}}
    ),
    KeywordCase(
        "dependentSchemas",
        _ABC | {"required": ["a"], "dependentSchemas": {"a": {"required": ["b", "c"]}}},
    ),
    KeywordCase(
        "contains",
        {"type": "array", "items": _DIGIT, "minItems": 2, "maxItems": 3, "contains": {"const": 7}},
    ),
)


def wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema sent: ``schema`` as the value ``v`` of a strict object (its ``$defs``
    at the root, where a ``$ref`` of ``#/$defs/...`` finds them)."""
    root: dict[str, Any] = {
        "type": "object",
        "properties": {"v": _strip(schema, "$defs")},
        "required": ["v"],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        root["$defs"] = schema["$defs"]
    return root


# How a route sends a schema and reads the answer's text and finish reason.
Send = Callable[[dict[str, Any], int], Answer]
Read = Callable[[Answer], tuple[str | None, str | None]]


@dataclass
class _Tally:
    judged: int = 0
    broke: int = 0
    cut: int = 0
    example: str | None = None  # an answer that broke it


def _judge(
    name: str, schema: Any, answers: list[Answer], read: Read, trial: Trial
) -> tuple[_Tally, Verdict | None]:
    """The tally of answers; a verdict when an answer failed or was not JSON."""
    check = validator(schema)
    tally = _Tally()
    for answer in answers:
        bad = failure(name, answer, trial)
        if bad is not None:
            return tally, bad
        text, finish = read(answer)
        if finish == "length":
            tally.cut += 1
            continue
        try:
            parsed = json.loads(text or "")
        except ValueError:
            return tally, Verdict(
                name, BROKEN, f"not JSON with finish_reason {finish}: {quote(text)}", (trial,)
            )
        if not isinstance(parsed, dict) or "v" not in parsed:
            tally.cut += 1  # the wrapper broke: this answer says nothing of the keyword
            continue
        tally.judged += 1
        if not check.is_valid(parsed["v"]):
            tally.broke += 1
            tally.example = tally.example or compact(parsed["v"], 60)
    return tally, None


def measure(case: KeywordCase, send: Send, read: Read, *, samples: int = SAMPLES) -> Verdict:
    """The verdict on one case (``samples`` answers, then the control if it held: half as
    many)."""
    answers = [send(wrapped(case.schema), SEED + i) for i in range(samples)]
    sent = compact({"v": case.schema}, 160)
    trial = Trial(sent, f"{len(answers)} answers")
    tally, bad = _judge(case.name, case.schema, answers, read, trial)
    if bad is not None:
        return bad
    counted = f"{tally.broke} of {tally.judged} answers broke it"
    cut = f" ({tally.cut} cut short or off-shape, not counted)" if tally.cut else ""
    trial = Trial(sent, counted + cut)
    if tally.judged < max(1, samples // 2):
        return Verdict(case.name, INCONCLUSIVE, f"{counted}{cut}: too few to tell", (trial,))
    rate = tally.broke / tally.judged
    if tally.broke:
        return Verdict(
            case.name,
            IGNORED,
            f"{counted} ({round(100 * rate)}%){cut}, e.g. v = {tally.example}",
            (trial,),
            rate=rate,
        )
    controls = _controls(samples)
    control = [send(wrapped(case.without_keyword()), CONTROL_SEED + i) for i in range(controls)]
    free, bad = _judge(case.name, case.schema, control, read, trial)
    if bad is not None or not free.judged:
        return Verdict(
            case.name, INCONCLUSIVE, f"{counted}{cut}; the control was not read", (trial,), rate=0.0
        )
    chance = (free.broke + 1) / (free.judged + 2)  # add-one: never certain
    confidence = 1 - (1 - chance) ** tally.judged
    without = f"without it {free.broke} of {free.judged} did"
    if free.broke == 0 or confidence < MIN_CONFIDENCE:
        return Verdict(
            case.name,
            INCONCLUSIVE,
            f"{counted}{cut}, but {without}: the test cannot tell",
            (trial,),
            confidence=confidence,
            rate=0.0,
        )
    return Verdict(
        case.name,
        HONOURED,
        f"{counted}{cut}; {without}",
        (trial,),
        confidence=confidence,
        rate=0.0,
    )


GATE: dict[str, Any] = {"type": "integer"}


def measure_all(send: Send, read: Read, *, samples: int = SAMPLES) -> list[Verdict]:
    """The verdict on every case, in table order; first one request of a plain schema
    (the gate): an engine that refuses json_schema, or answers it with anything but
    JSON of the schema, gets that verdict on every case without the corpus sent."""
    answer = send(wrapped(GATE), SEED)
    trial = Trial(compact({"v": GATE}), "the gate: a plain schema first")
    bad = failure("json_schema", answer, trial)
    text, finish = read(answer)
    if bad is None:
        try:
            parsed = json.loads(text or "")
        except ValueError:
            parsed = None
        if not (isinstance(parsed, dict) and "v" in parsed):
            outcome = INCONCLUSIVE if finish == "length" else IGNORED
            bad = Verdict(
                "json_schema",
                outcome,
                f"a plain schema was answered with {quote(text)} (finish_reason {finish}): "
                "json_schema itself is not honoured",
                (trial,),
            )
    if bad is not None:
        return [
            Verdict(case.name, bad.outcome, f"json_schema: {bad.summary}", bad.trials)
            for case in CASES
        ]
    return [measure(case, send, read, samples=samples) for case in CASES]


def planned(keywords: bool = True, *, samples: int = SAMPLES) -> int:
    """The most requests the keyword probe sends."""
    return 1 + len(CASES) * (samples + _controls(samples)) if keywords else 0


def _controls(samples: int) -> int:
    """Answers of the control: half the samples, two at the least."""
    return max(2, samples * CONTROL_SAMPLES // SAMPLES)


def case_named(name: str) -> KeywordCase:
    """The case whose ``name`` is ``name``."""
    return next(c for c in CASES if c.name == name)
