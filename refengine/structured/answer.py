"""How a structured request is answered: a script of pieces drawn before the row runs,
or the model's own text (with the finish reason it should carry).

The decisions and the values come from the row's draws (sampler/draws.py), keyed by the
request's seed (0 at temperature 0: one answer, as greedy decoding gives one), so a
seed replays the same JSON and the same calls. Tool choice:

- ``none``: text. ``required``: one call or more. A named function: one call of it.
- ``auto``: text after a tool result (the last message is a tool's); else a call of
  each tool the last user message names; else a call or text, one draw each way.
- more than one call only with ``parallel_tool_calls`` (true by default): the tools
  the prompt names, or, when it names none, a second call now and then.

The text of an answer that calls nothing is the schema's JSON when response_format asks
for one, else the model's. The defect flags (options.py) bend each rule as named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from refengine.errors import EngineError
from refengine.events import Piece, ToolArguments, ToolCallStart
from refengine.structured.generate import generate
from refengine.structured.options import StructuredOptions
from refengine.structured.request import AUTO, FUNCTION, NONE, REQUIRED, Asked
from refengine.structured.schema import SchemaRefused
from sampler.draws import Draws

SECOND_CALL = 0.3  # the chance of a second call when parallel calls are allowed
_PIECES = re.compile(r"\w+|\s+|[^\w\s]+")


@dataclass(frozen=True)
class Plan:
    """``script``: the answer's pieces (None: the model writes the text); ``end``: the
    finish reason when the script runs out; ``stop_label``: the finish reason of a text
    the model ends itself."""

    script: tuple[Piece, ...] | None = None
    end: str = "stop"
    stop_label: str = "stop"


def pieces(text: str) -> tuple[str, ...]:
    """``text`` cut as a tokenizer would: words, runs of spaces, runs of punctuation."""
    return tuple(_PIECES.findall(text))


def _calls(asked: Asked, draws: Draws, options: StructuredOptions) -> list[str] | None:
    """The functions called, in order ([] for text); None: prose labelled tool_calls."""
    choice = asked.choice
    if (choice == NONE and options.ignore_choice_none) or (
        choice == FUNCTION and options.ignore_named_choice
    ):
        choice = AUTO
    if not asked.tools or choice == NONE:
        return []
    if choice == FUNCTION and asked.named is not None:
        return [asked.named]
    if choice == REQUIRED and options.prose_for_required:
        return None
    parallel = asked.parallel or options.ignore_parallel_false
    if choice == AUTO and asked.last_role == "tool":
        return []
    if asked.mentioned:
        return list(asked.mentioned if parallel else asked.mentioned[:1])
    if choice == AUTO and not draws.chance(0.5):
        return []
    names = [t.name for t in asked.tools]
    called = [names[draws.pick(len(names))]]
    if parallel and draws.chance(SECOND_CALL):
        called.append(names[draws.pick(len(names))])
    return called


def _call_id(draws: Draws) -> str:
    return "call_" + "".join(f"{draws.word():08x}" for _ in range(3))


def plan_answer(
    asked: Asked,
    *,
    key: int,
    words: Sequence[str],
    max_tokens: int,
    options: StructuredOptions,
) -> Plan:
    """The answer to ``asked``, drawn from the stream keyed by ``key``."""
    try:
        return _plan(asked, Draws(key), words, max_tokens, options)
    except SchemaRefused as exc:  # a schema with no value within the recursion bound
        param = exc.param or "response_format.json_schema.schema"
        raise EngineError(exc.message, param=param, code="invalid_json_schema") from exc


def _plan(
    asked: Asked,
    draws: Draws,
    words: Sequence[str],
    max_tokens: int,
    options: StructuredOptions,
) -> Plan:
    called = _calls(asked, draws, options)
    if called is None:
        return Plan(stop_label="tool_calls")
    if called:
        script: list[Piece] = []
        at = {t.name: i for i, t in enumerate(asked.tools)}
        for index, name in enumerate(called):
            script.append(ToolCallStart(index, _call_id(draws), name))
            try:
                arguments = generate(asked.tools[at[name]].parameters, draws, words).value
            except SchemaRefused as exc:
                exc.param = f"tools[{at[name]}].function.parameters"
                raise
            script += [ToolArguments(index, p) for p in pieces(json.dumps(arguments))]
        return Plan(tuple(script), end="tool_calls")
    if asked.schema is None:
        return Plan()
    if asked.format == "json_object" and options.json_whitespace and not asked.says_json:
        # What OpenAI warns of: without an instruction to write JSON, the grammar lets
        # the model write whitespace until the token limit.
        return Plan(("{", *(["\n"] * max_tokens)))  # longer than max_tokens: cut there
    value = generate(asked.schema, draws, words).value
    return Plan(pieces(json.dumps(value, ensure_ascii=False)))
