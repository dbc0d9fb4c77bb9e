"""A request's JSON Schema checked where it stands, as a field rule's ``json_schema`` says.

In order, the first problem refusing the schema: the limits (survey.py: size, depth,
enums, patterns, so a hostile schema reaches nothing else), the JSON Schema
metaschema, the ``$ref``s (refs.py), the validator library's own build (a pattern
that is not a regular expression), OpenAI's strict subset when ``strict: true`` is
beside the schema (strict.py); then the engine's verdict on each keyword
(keywords.py). Every error names the exact path of what is wrong, the field's path
then the path inside the schema (``response_format.json_schema.schema.properties.
name.maxLength``). What a schema gets is worked out once per distinct schema text and
kept: a client sends the same schema with every request.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest
from gateway.schemas.keywords import Refusal, keyword_refusals
from gateway.schemas.refs import ref_problems
from gateway.schemas.rules import JsonSchemaRules
from gateway.schemas.strict import strict_problem
from gateway.schemas.survey import INVALID, Problem, Steps, survey
from gateway.schemas.validator import metaschema_error, schema_key, validator

FUNCTION_CODE = "invalid_function_parameters"
FORMAT_CODE = "invalid_json_schema"


def schema_path(prefix: str, steps: Steps) -> str:
    """A path inside a schema, after the field's: ``prefix.properties.name``, ``.anyOf[1]``."""
    return prefix + "".join(f"[{s}]" if type(s) is int else f".{s}" for s in steps)


class SchemaCheck:
    """One field rule's ``json_schema``, compiled: the refusals a schema gets there."""

    __slots__ = ("rules", "kept")
    MOST_KEPT = 256

    def __init__(self, rules: JsonSchemaRules) -> None:
        self.rules = rules
        # By (schema text, strict asked, a function's, its name): what it gets.
        self.kept: dict[tuple[bytes, bool, bool, str], list[Refusal]] = {}

    def refusals(
        self, schema: Any, path: str, beside: dict[str, Any]
    ) -> list[tuple[InvalidRequest, bool | None]]:
        """What refuses ``schema`` at ``path`` (``beside``: the object holding it, for its
        ``strict`` and ``name``): each error, and whether it is only reported (None: as
        the field's rule); empty when the schema passes."""
        # A function's parameters: chat's and Responses', or a Messages tool's input_schema.
        function = path.endswith(("parameters", "input_schema"))
        name = beside.get("name")
        name = name if isinstance(name, str) else ""
        strict = beside.get("strict") is True and self.rules.strict == "openai"
        key = (schema_key(schema), strict, function, name)
        found = self.kept.get(key)
        if found is None:
            found = self._refusals(schema, key[0], strict=strict, function=function, name=name)
            if len(self.kept) >= self.MOST_KEPT:
                del self.kept[next(iter(self.kept))]
            self.kept[key] = found
        return [(_error(path, r.problem, function), r.report) for r in found]

    def _refusals(
        self, schema: Any, text: bytes, *, strict: bool, function: bool, name: str
    ) -> list[Refusal]:
        head = (
            f"Invalid schema for function '{name}'"
            if function
            else f"Invalid schema for response_format '{name}'"
        )
        surveyed = survey(schema, self.rules.limits)
        if isinstance(surveyed, Problem):
            return [Refusal(surveyed, None)]
        broken = metaschema_error(schema)
        if broken is not None:
            steps, what = broken
            return [Refusal(Problem(steps, INVALID, f"{head}: {what} (at '{{path}}')."), None)]
        problem = ref_problems(schema, surveyed, head)
        if problem is None:
            try:
                validator(schema, text)
            except ValueError as exc:
                problem = Problem(
                    _culprit(surveyed.patterns), INVALID, f"{head}: {exc} (at '{{path}}')."
                )
        if problem is None and strict:
            problem = strict_problem(schema, surveyed, head)
        if problem is not None:
            return [Refusal(problem, None)]
        return keyword_refusals(self.rules, surveyed.nodes)


def _culprit(patterns: list[tuple[Steps, str]]) -> Steps:
    """Where the validator's build failed: the first pattern that is not a regular
    expression (the library names none), else the schema itself."""
    for steps, pattern in patterns:
        try:
            validator({"pattern": pattern})
        except ValueError:
            return steps
    return ()


def _error(prefix: str, problem: Problem, function: bool) -> InvalidRequest:
    path = schema_path(prefix, problem.steps)
    code = problem.code
    if code == INVALID:
        code = FUNCTION_CODE if function else FORMAT_CODE
    return InvalidRequest(problem.message.replace("{path}", path), param=path, code=code)
