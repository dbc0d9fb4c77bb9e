"""OpenAI's strict subset of JSON Schema: what ``strict: true`` beside a schema asks for.

OpenAI refuses a strict schema outside its subset rather than downgrade it without a
word (shared/STRUCTURED-OUTPUTS.md section 2): the root an object and not ``anyOf``;
every object closed (``additionalProperties: false``) with every property
``required``; none of ``allOf``, ``not``, ``dependentRequired``, ``dependentSchemas``,
``if``, ``then``, ``else``. The messages are OpenAI's own ("In context=('properties',
'a'), ..."), so a client that works here works there and the other way round.
"""

from __future__ import annotations

from typing import Any

from gateway.schemas.survey import INVALID, Problem, Steps, Survey

REFUSED = ("allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else")


def _context(steps: Steps) -> str:
    return "(" + ", ".join(repr(str(s)) for s in steps) + ("," if len(steps) == 1 else "") + ")"


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def strict_problem(root: Any, found: Survey, invalid: str) -> Problem | None:
    """The first way ``root`` leaves OpenAI's strict subset (``invalid``: the message
    head, "Invalid schema for function 'f'"), or None."""
    if not isinstance(root, dict) or root.get("type") != "object" or "anyOf" in root:
        return Problem(
            (),
            INVALID,
            f"{invalid}: schema must be a JSON Schema of 'type: \"object\"', and not 'anyOf' "
            "at its root, with strict: true (at '{path}').",
        )
    for steps, node in found.nodes:
        context = _context(steps)
        for keyword in REFUSED:
            if keyword in node:
                return Problem(
                    (*steps, keyword),
                    INVALID,
                    f"{invalid}: In context={context}, '{keyword}' is not permitted "
                    "with strict: true (at '{path}').",
                )
        if not _is_object(node):
            continue
        if node.get("additionalProperties") is not False:
            return Problem(
                (*steps, "additionalProperties"),
                INVALID,
                f"{invalid}: In context={context}, 'additionalProperties' is required to be "
                "supplied and to be false (at '{path}').",
            )
        properties = node.get("properties")
        names = list(properties) if isinstance(properties, dict) else []
        required = node.get("required")
        listed = set(required) if isinstance(required, list) else set()
        missing = [n for n in names if n not in listed]
        if missing:
            return Problem(
                (*steps, "required"),
                INVALID,
                f"{invalid}: In context={context}, 'required' is required to be supplied and "
                f"to be an array including every key in properties. Missing {missing[0]!r} "
                "(at '{path}').",
            )
    return None
