"""The rules the probe below the field calls for (the policy format:
docs/structured-outputs.md): each JSON-Schema keyword passed or refused as measured
(``json_schema.keywords``, narrowed by type, sibling, absence or value), written once
under an anchor and repeated wherever a schema stands; ``response_format``, ``tools``,
``tool_choice`` and ``parallel_tool_calls`` passed as far as the engine honours them;
and the answer checks turned on for what is passed. Each rule carries the verdict and
its evidence in a comment, as the field rules do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.probe import keywords, tools
from gateway.probe.structured import StructuredProbe
from gateway.probe.verdict import BROKEN, HONOURED, IGNORED, REJECTED, Verdict, verdict_line
from gateway.probe.yamltext import Alias, Anchor, Noted

Rule = dict[str, Any]
ANCHOR = "engine-schema"
NATIVE_ANCHOR = "engine-schema-native"  # the engine's own /v1/responses, measured there
NAME: Rule = {
    "action": "pass",
    "type": "string",
    "required": True,
    "pattern": "[a-zA-Z0-9_-]{1,64}",
}
# ft serve's own (policies/ft-serve.yaml): no grammar, so no keyword is named.
NO_GRAMMAR: Rule = {"unknown_keywords": "reject"}
_WHY = {
    IGNORED: "ignores",
    REJECTED: "refuses",
    BROKEN: "fails on",
}


@dataclass
class SchemaAnchor:
    """Writes the keyword table once (``&engine-schema``), then ``*engine-schema``."""

    table: Rule
    name: str = ANCHOR
    written: bool = field(default=False)

    def use(self) -> Any:
        """The anchored table the first time, an alias after."""
        if self.written:
            return Alias(self.name)
        self.written = True
        return Anchor(self.name, self.table)


def _reason(name: str, verdict: Verdict, day: str) -> str:
    what = _WHY.get(verdict.outcome)
    head = f"This engine {what} {name}" if what else f"{name} is not verified on this engine"
    return f"{head} (probed {day}: {verdict.summary})."[:400]


def _context_rule(name: str, verdict: Verdict | None, day: str) -> Rule:
    if verdict is not None and verdict.outcome == HONOURED:
        return {"action": "pass"}
    if verdict is None:
        return {"action": "reject", "reason": f"{name} was not probed on this engine."}
    return {"action": "reject", "reason": _reason(name, verdict, day)}


def keyword_table(found: list[Verdict], day: str) -> Rule:
    """``json_schema``: each keyword's rule from its cases' verdicts, with its evidence."""
    by_name = {v.field: v for v in found}
    rules: dict[str, Rule] = {}
    notes: dict[str, list[str]] = {}
    for case in keywords.CASES:
        verdict = by_name.get(case.name)
        rule = rules.setdefault(case.keyword, {"action": "pass"})
        shown = verdict_line(verdict) if verdict is not None else "not probed"
        notes.setdefault(case.keyword, []).append(f"{case.name}: {shown}")
        if case.context is None:
            rule |= _context_rule(case.keyword, verdict, day)
            continue
        kind, what = case.context
        rule.setdefault(kind, {})[what] = _context_rule(case.name, verdict, day)
        if kind == keywords.VALUES:
            rule["unknown"] = {
                "action": "reject",
                "reason": f"Only the formats {', '.join(keywords.FORMATS)} were probed.",
            }
    table: Rule = {name: Noted(rule, "; ".join(notes[name])) for name, rule in rules.items()}
    ref = dict(rules["$ref"])
    for holder in ("$defs", "definitions"):
        table[holder] = Noted(dict(ref), f"{holder}: as $ref, which reads it")
    return {"unknown_keywords": "reject", "keywords": table}


def format_rules(schema: Rule, json_object: Rule | None = None) -> Rule:
    """A response format's rule: text passes, json_object and json_schema as given."""
    return {
        "action": "pass",
        "type": "object",
        "select": {
            "key": "type",
            "rules": {
                "text": {"fields": {}},
                "json_object": {"fields": {}} if json_object is None else json_object,
                "json_schema": schema,
            },
            "unknown": {"action": "reject"},
        },
    }


def _schema_field(anchor: SchemaAnchor) -> Rule:
    """The rules beside a schema (name, description, strict) and the schema's own."""
    return {
        "name": NAME,
        "description": {"action": "pass", "type": "string"},
        "strict": {"action": "pass", "type": "boolean"},
        "schema": {
            "action": "pass",
            "type": "object",
            "required": True,
            "json_schema": anchor.use(),
        },
    }


def response_format_rule(anchor: SchemaAnchor | None, *, json_object: Rule | None = None) -> Rule:
    """``response_format`` on chat when the engine's json_schema holds: checked keyword
    by keyword (``anchor``: the table), refused when not measured; ``json_object`` its
    own rule (None: passed)."""
    if anchor is None:
        schema: Rule = {
            "action": "reject",
            "reason": "Its JSON-Schema keywords were not measured on this engine.",
        }
    else:
        wrapper = {"action": "pass", "type": "object", "required": True}
        schema = {"fields": {"json_schema": wrapper | {"fields": _schema_field(anchor)}}}
    return format_rules(schema, json_object)


def text_format_rule(anchor: SchemaAnchor | None) -> Rule:
    """``text.format`` on /v1/responses: the same, flat (no json_schema wrapper)."""
    if anchor is None:
        return format_rules(
            {"action": "reject", "reason": "Its JSON-Schema keywords were not measured."}
        )
    flat = {"type": {"action": "pass", "type": "string"}} | _schema_field(anchor)
    return format_rules({"fields": flat})


def tools_honoured(found: StructuredProbe | None) -> bool:
    """Whether tool calling works at all: auto or required answered with calls."""
    if found is None:
        return False
    return any(
        (v := found.tool(name)) is not None and v.outcome == HONOURED
        for name in (tools.AUTO, tools.REQUIRED)
    )


def function_rule(parameters: Any) -> Rule:
    """A chat tool's ``function``, its parameters checked by ``parameters``."""
    return {
        "action": "pass",
        "type": "object",
        "required": True,
        "fields": {
            "name": {k: v for k, v in NAME.items()},
            "description": {"action": "pass", "type": "string"},
            "parameters": {"action": "pass", "type": "object", "json_schema": parameters},
            "strict": {"action": "pass", "type": "boolean"},
        },
    }


def tool_rules(found: StructuredProbe, anchor: SchemaAnchor | None, day: str) -> dict[str, Any]:
    """``tools``, ``tool_choice``, ``parallel_tool_calls`` on chat, each with its verdicts."""
    parameters = anchor.use() if anchor is not None else dict(NO_GRAMMAR)
    tools_rule: Rule = {
        "action": "pass",
        "type": "array",
        "select": {
            "key": "type",
            "rules": {"function": {"fields": {"function": function_rule(parameters)}}},
            "unknown": {"action": "reject"},
        },
    }
    choices = {
        "none": found.tool(tools.NONE),
        "auto": found.tool(tools.AUTO),
        "required": found.tool(tools.REQUIRED),
    }
    named = found.tool(tools.NAMED)
    kept = [c for c, v in choices.items() if v is not None and v.outcome == HONOURED]
    refused = [c for c in choices if c not in kept] + (
        [] if named is not None and named.outcome == HONOURED else ["a named function"]
    )
    if not refused:
        choice: Rule = {"action": "pass", "type": ["string", "object"]}
    else:
        choice = {
            "action": "reject",
            "type": ["string", "object"],
            "neutral": kept,
            "reason": f"This engine does not honour tool_choice {', '.join(refused)} "
            f"(probed {day}).",
        }
    parallel = found.tool(tools.PARALLEL)
    if parallel is not None and parallel.outcome == HONOURED:
        parallel_rule: Rule = {"action": "pass", "type": "boolean"}
    else:
        parallel_rule = {
            "action": "reject",
            "type": "boolean",
            "neutral": [True],
            "reason": _reason("parallel_tool_calls false", parallel, day)
            if parallel is not None
            else "Not probed.",
        }
    notes = {
        name: "; ".join(f"{v.field}: {verdict_line(v)}" for v in found.tools if v.field in fields)
        for name, fields in (
            ("tools", (tools.AUTO, tools.REQUIRED, tools.ARGUMENTS)),
            ("tool_choice", (tools.NONE, tools.AUTO, tools.REQUIRED, tools.NAMED)),
            ("parallel_tool_calls", (tools.PARALLEL,)),
        )
    }
    return {
        "tools": Noted(tools_rule, f"probed {day}: {notes['tools']}"),
        "tool_choice": Noted(choice, f"probed {day}: {notes['tool_choice']}"),
        "parallel_tool_calls": Noted(
            parallel_rule, f"probed {day}: {notes['parallel_tool_calls']}"
        ),
    }


def answers_rule(*, schema: bool, tool_calls: bool) -> Rule:
    """The answer checks for what the policy passes: enforced, so that what the probe's
    samples did not catch is still never a 200 with bad data."""
    checks: Rule = {}
    if schema:
        checks["schema"] = "enforce"
    if tool_calls:
        checks |= {"tool_arguments": "enforce", "tool_choice": "enforce"}
        checks["parallel_tool_calls"] = "enforce"
    return checks
