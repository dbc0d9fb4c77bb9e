"""The engine's verdict on each keyword of a schema, where it stands.

A grammar backend honours a keyword in one place and drops it in another: lengths
beside a pattern, bounds on a number but not an integer, some ``format`` values
(shared/STRUCTURED-OUTPUTS.md section 3). A keyword rule (schemas/rules.py)
says so, and the first context that applies decides: the keyword's value
(``values``), a sibling present (``beside``) or absent (``without``), the node's
type (``types``), else the keyword's own action; where several entries apply, one
refusing refuses. docs/structured-outputs.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.schemas.rules import ContextRule, JsonSchemaRules, KeywordRule
from gateway.schemas.survey import Problem, Steps
from gateway.schemas.vocabulary import ASSERTING


@dataclass(frozen=True, slots=True)
class Refusal:
    """A keyword refused where it stands: the problem, and whether it is only reported
    (None: as the enclosing rule)."""

    problem: Problem
    report: bool | None


def _report(rule: ContextRule, keyword: KeywordRule) -> bool | None:
    enforcement = rule.enforcement or keyword.enforcement
    return None if enforcement is None else enforcement == "report"


def _decide(
    keyword: KeywordRule, node: dict[str, Any], value: Any
) -> tuple[ContextRule, str] | None:
    """The refusing rule that decides ``keyword`` in ``node`` and its context's words
    ("beside 'pattern'"), or None when the keyword passes there."""
    if keyword.values is not None and isinstance(value, str):
        chosen = keyword.values.get(value, keyword.unknown)
        return (chosen, f" value {value[:60]!r}") if chosen.action == "reject" else None
    applying: list[tuple[ContextRule, str]] = []
    for other, rule in (keyword.beside or {}).items():
        if other in node:
            applying.append((rule, f" beside '{other}'"))
    for other, rule in (keyword.without or {}).items():
        if other not in node:
            applying.append((rule, f" without '{other}'"))
    if not applying and keyword.types:
        declared = node.get("type")
        kinds = declared if isinstance(declared, list) else [declared]
        named = [k for k in kinds if isinstance(k, str) and k in keyword.types]
        if named:
            for kind in kinds:
                if isinstance(kind, str) and kind != "null":
                    rule = keyword.types.get(kind)  # type: ignore[call-overload]
                    applying.append((keyword, "") if rule is None else (rule, f" on type '{kind}'"))
    if not applying:
        applying.append((keyword, ""))
    for rule, words in applying:
        if rule.action == "reject":
            return rule, words
    return None


def keyword_refusals(
    rules: JsonSchemaRules, nodes: list[tuple[Steps, dict[str, Any]]]
) -> list[Refusal]:
    """Every keyword of ``nodes`` the rules refuse, in the order they are written."""
    named = rules.keywords
    unknown_refused = rules.unknown_keywords == "reject"
    found: list[Refusal] = []
    for steps, node in nodes:
        for name, value in node.items():
            keyword = named.get(name)
            if keyword is None:
                if unknown_refused and name in ASSERTING:
                    found.append(
                        Refusal(
                            Problem(
                                (*steps, name),
                                "unsupported_schema_keyword",
                                "Unsupported value: '{path}': this deployment's engine is not "
                                f"known to honour the JSON Schema keyword '{name}', which this "
                                "policy does not name.",
                            ),
                            None,
                        )
                    )
                continue
            decided = _decide(keyword, node, value)
            if decided is None:
                continue
            rule, words = decided
            reason = rule.reason or keyword.reason
            found.append(
                Refusal(
                    Problem(
                        (*steps, name),
                        "unsupported_schema_keyword",
                        "Unsupported value: '{path}': this deployment's engine does not honour "
                        f"the JSON Schema keyword '{name}'{words}."
                        + (f" {reason}" if reason else ""),
                    ),
                    _report(rule, keyword),
                )
            )
    return found
