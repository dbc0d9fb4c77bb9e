"""The probe of tool calling on chat: does each ``tool_choice`` and ``parallel_tool_calls:
false`` do what it says, and do the calls' arguments follow the tool's parameters.

A table of cases, each a request (two function tools, a prompt, the choice) sent
``SAMPLES`` times at temperature 1 with a seed each, and a reading of the answers'
``tool_calls``. ``auto`` with a prompt that names a tool: honoured if a call of it
comes back. ``required`` with a prompt that names none: honoured if every answer
calls; prose (whatever its finish_reason) is the defect. A named function the prompt
does not name: honoured if every answer calls that one alone. ``none`` with a prompt
that names a tool: honoured if no answer calls (inconclusive if the engine never
called a tool at all). ``parallel_tool_calls: false`` with a prompt that names both:
honoured if no answer has two calls, while the same request without it has some
(else inconclusive). Every call's arguments are checked against its tool's
parameters: ``tool arguments``.
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
    Trial,
    Verdict,
    compact,
    failure,
)
from gateway.schemas.validator import validator

SAMPLES = 4
SEED = 5200
MAX_TOKENS = 96  # a call is short; a prose answer says what it needs to by then
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string"}},
    "required": ["zone"],
    "additionalProperties": False,
}
PARAMETERS = {"get_weather": WEATHER, "get_time": TIME}
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": f"{name.replace('_', ' ')}", "parameters": p},
    }
    for name, p in PARAMETERS.items()
]
NAMES_ONE = "Call get_weather for Paris."
NAMES_BOTH = "Call get_weather for Paris and get_time for Europe/Paris, both at once."
NAMES_NONE = "Hello there."

AUTO, REQUIRED, NAMED, NONE = (
    "tool_choice auto",
    "tool_choice required",
    "tool_choice named",
    "tool_choice none",
)
PARALLEL = "parallel_tool_calls false"
ARGUMENTS = "tool arguments"
FIELDS = (AUTO, REQUIRED, NAMED, NONE, PARALLEL, ARGUMENTS)

Send = Callable[[dict[str, Any], int], Answer]


@dataclass(frozen=True)
class Calls:
    """One answer's calls (name, arguments text) and its finish reason and text."""

    calls: list[tuple[str, str]]
    finish: str | None
    text: str | None


def read_calls(answer: Answer) -> Calls:
    """The chat answer's tool calls, finish reason and content."""
    body = answer.body if isinstance(answer.body, dict) else {}
    choice = (body.get("choices") or [{}])[0]
    choice = choice if isinstance(choice, dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append((str(function.get("name")), str(function.get("arguments"))))
    content = message.get("content")
    return Calls(calls, choice.get("finish_reason"), content if isinstance(content, str) else None)


@dataclass(frozen=True)
class ToolCase:
    """A check: the request's fields and the question the answers answer."""

    field: str
    fields: dict[str, Any]


CASES: tuple[ToolCase, ...] = (
    ToolCase(AUTO, {"prompt": NAMES_ONE, "tool_choice": "auto"}),
    ToolCase(REQUIRED, {"prompt": NAMES_NONE, "tool_choice": "required"}),
    ToolCase(
        NAMED,
        {
            "prompt": NAMES_ONE,
            "tool_choice": {"type": "function", "function": {"name": "get_time"}},
        },
    ),
    ToolCase(NONE, {"prompt": NAMES_ONE, "tool_choice": "none"}),
    ToolCase(PARALLEL, {"prompt": NAMES_BOTH, "parallel_tool_calls": False}),
)
CONTROL = {"prompt": NAMES_BOTH, "parallel_tool_calls": True}


def request(fields: dict[str, Any]) -> dict[str, Any]:
    """The chat fields of a case (``prompt`` becomes the user message)."""
    body = {k: v for k, v in fields.items() if k != "prompt"}
    return {
        "messages": [{"role": "user", "content": fields["prompt"]}],
        "tools": TOOLS,
        "max_tokens": MAX_TOKENS,
        "temperature": 1.0,
        **body,
    }


def _shown(found: list[Calls]) -> str:
    parts = []
    for answer in found:
        names = "+".join(n for n, _ in answer.calls) or f"text ({answer.finish})"
        parts.append(names)
    return ", ".join(parts)


def _verdict(
    case: ToolCase, found: list[Calls], seen_calls: bool, control: list[Calls]
) -> tuple[str, str]:
    called = [bool(a.calls) for a in found]
    shown = _shown(found)
    if case.field == AUTO:
        if any(n == "get_weather" for a in found for n, _ in a.calls):
            return HONOURED, f"a call of the tool the prompt names came back: {shown}"
        return IGNORED, f"no call of the tool the prompt names in {len(found)} answers: {shown}"
    if case.field == REQUIRED:
        if all(called):
            return HONOURED, f"every answer calls a tool: {shown}"
        prose = [a for a in found if not a.calls]
        return IGNORED, (
            f"{len(prose)} of {len(found)} answers are prose, finish_reason "
            f"{'/'.join(sorted({str(a.finish) for a in prose}))}: {shown}"
        )
    if case.field == NAMED:
        if all([n for n, _ in a.calls] == ["get_time"] for a in found):
            return HONOURED, f"every answer calls the named function alone: {shown}"
        return IGNORED, f"the named function get_time was not the only call: {shown}"
    if case.field == NONE:
        if any(called):
            return IGNORED, f"tool calls came back under tool_choice none: {shown}"
        if not seen_calls:
            return INCONCLUSIVE, f"no calls, but the engine called no tool in any check: {shown}"
        return HONOURED, f"no answer calls a tool: {shown}"
    several = [a for a in found if len(a.calls) > 1]
    if several:
        return IGNORED, f"{len(several)} of {len(found)} answers have several calls: {shown}"
    if not any(len(a.calls) > 1 for a in control):
        return INCONCLUSIVE, (
            f"one call at most, but also without it ({_shown(control)}): the test cannot tell"
        )
    return HONOURED, f"one call at most: {shown}; without it: {_shown(control)}"


def measure_all(send: Send) -> list[Verdict]:
    """The verdict of each case, then the arguments' verdict over every call seen."""
    verdicts: list[Verdict] = []
    read: dict[str, list[Calls]] = {}
    failed: dict[str, Verdict] = {}
    trials: dict[str, Trial] = {}
    for case in (*CASES, ToolCase("control", CONTROL)):
        answers = [send(request(case.fields), SEED + i) for i in range(SAMPLES)]
        trial = Trial(compact({k: v for k, v in case.fields.items()}, 160), "")
        bad = next((b for a in answers if (b := failure(case.field, a, trial)) is not None), None)
        if bad is not None:
            failed[case.field] = bad
            continue
        read[case.field] = [read_calls(a) for a in answers]
        trials[case.field] = Trial(trial.sent, _shown(read[case.field]))
    seen = any(a.calls for found in read.values() for a in found)
    for case in CASES:
        if case.field in failed:
            verdicts.append(failed[case.field])
            continue
        outcome, summary = _verdict(case, read[case.field], seen, read.get("control", []))
        verdicts.append(Verdict(case.field, outcome, summary, (trials[case.field],)))
    verdicts.append(_arguments(read))
    return verdicts


def _arguments(read: dict[str, list[Calls]]) -> Verdict:
    calls = [c for found in read.values() for a in found for c in a.calls]
    known = [(n, a) for n, a in calls if n in PARAMETERS]
    if not known:
        return Verdict(ARGUMENTS, INCONCLUSIVE, "no call of a defined tool came back")
    broke, unparsed = 0, 0
    example = ""
    for name, text in known:
        try:
            value = json.loads(text)
        except ValueError:
            unparsed += 1
            example = example or text[:60]
            continue
        if not validator(PARAMETERS[name]).is_valid(value):
            broke += 1
            example = example or text[:60]
    trial = Trial("every call of the checks above", f"{len(known)} calls")
    if unparsed:
        return Verdict(
            ARGUMENTS,
            BROKEN,
            f"{unparsed} of {len(known)} calls' arguments are not JSON: {example!r}",
            (trial,),
        )
    if broke:
        return Verdict(
            ARGUMENTS,
            IGNORED,
            f"{broke} of {len(known)} calls' arguments broke the tool's "
            f"parameters, e.g. {example!r}",
            (trial,),
            rate=broke / len(known),
        )
    return Verdict(
        ARGUMENTS,
        HONOURED,
        f"all {len(known)} calls' arguments follow the parameters",
        (trial,),
        rate=0.0,
    )


def planned() -> int:
    """The most requests the tool probe sends."""
    return (len(CASES) + 1) * SAMPLES
