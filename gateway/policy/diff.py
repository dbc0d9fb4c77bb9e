"""Two policies compared by their effect, not their text (``ft-gateway diff``).

Each policy is compiled as the server compiles it, for every route and every
overlay either file names (the route as it is; per model; per profile), and
each rule is flattened to a path (``messages[role=developer].content``) and
what it means: its action, type, range, enum, lengths, neutral values, rename
target, default, cross-key requirement, enforcement; a ``json_schema``'s limits,
strict mode and each keyword's verdict (``PATH.(json_schema).maxLength``); the
route's answer checks (``(answers)``). Layout, comments, YAML
anchors, key order and the ``reason`` texts do not count. An overlay's
differences are listed only where they differ from the route's own.

``compare_bodies`` runs recorded request bodies through both and counts those
whose verdict (forwarded unchanged, forwarded changed, refused with a code)
moves, by how.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from gateway.policy.compiled import ObjectRules, Rule
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.file import FieldRule
from gateway.schemas.expect import Answers
from gateway.schemas.rules import ANSWER_CHECKS, JsonSchemaRules

BASE = ""  # the context of a route with no overlay
NOT_NAMED = "not named"  # the key of a path's meaning when another rule decides it
ANSWERS = "(answers)"  # the path of a route's answer checks
_SKIPPED = {"fields", "select", "reason", "enforcement", "value", "json_schema"}
# What a key left out of a rule means (a rule's meaning leaves defaults out).
DEFAULTS: dict[str, Any] = {
    **FieldRule.model_validate({"action": "pass"}).model_dump(exclude=_SKIPPED | {"action"}),
    "enforcement": "enforce",
}


@dataclass(frozen=True)
class RuleChange:
    """One path whose rule differs: ``old``/``new`` None where a policy has no rule."""

    context: str  # BASE, "model NAME" or "profile NAME"
    route: str
    path: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None

    @property
    def changes(self) -> dict[str, tuple[Any, Any]]:
        """The meaning keys that differ, old and new value (a default where unset)."""
        old, new = self.old or {}, self.new or {}
        out = {}
        for k in [*old, *(k for k in new if k not in old)]:
            a, b = old.get(k, DEFAULTS.get(k)), new.get(k, DEFAULTS.get(k))
            if a != b or type(a) is not type(b):
                out[k] = (a, b)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "context": self.context or "route",
            "route": self.route,
            "path": self.path,
            "old": self.old,
            "new": self.new,
            "changes": {k: list(v) for k, v in self.changes.items()},
        }


def meaning(rule: Rule) -> dict[str, Any]:
    """What a compiled rule does, as plain data (no texts, no layout)."""
    source = rule.source
    data = source.model_dump(exclude=_SKIPPED, exclude_defaults=True)
    data["action"] = source.action
    if source.has_value:
        data["value"] = source.value
    if rule.report:
        data["enforcement"] = "report"
    if source.fields is not None:
        data["unknown_fields"] = source.unknown_fields
    if source.select is not None:
        data["select"] = {"key": source.select.key, "absent": source.select.absent}
    return data


def flatten(rules: ObjectRules, prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every rule under ``rules`` by its path, and each object's rule for unknown keys."""
    unknown: dict[str, Any] = {"action": rules.unknown}
    if rules.report:
        unknown["enforcement"] = "report"
    where = f"{prefix}.(unknown fields)" if prefix else "(unknown fields)"
    out: dict[str, dict[str, Any]] = {where: unknown}
    if not prefix:
        out[ANSWERS] = _answers_meaning(rules.answers)
    for name, rule in rules.rules.items():
        path = f"{prefix}.{name}" if prefix else name
        out.update(_flatten_rule(rule, path))
    return out


def _answers_meaning(answers: Answers | None) -> dict[str, Any]:
    checks = asdict(answers) if answers is not None else dict.fromkeys(ANSWER_CHECKS, "off")
    return {"action": "answers", **checks}


def _without_reasons(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_reasons(v) for k, v in data.items() if k != "reason"}
    return data


def schema_rules(rules: JsonSchemaRules, path: str) -> dict[str, dict[str, Any]]:
    """A ``json_schema``'s meaning by path: its limits and strict mode, what a keyword it
    does not name gets, and each keyword's verdict (``PATH.(json_schema).maxLength``)."""
    where = f"{path}.(json_schema)"
    out: dict[str, dict[str, Any]] = {
        where: {"action": "json_schema", "strict": rules.strict, **rules.limits.model_dump()},
        f"{where}.(unknown fields)": {"action": rules.unknown_keywords},
    }
    for name, keyword in rules.keywords.items():
        data = _without_reasons(keyword.model_dump(exclude_defaults=True))
        out[f"{where}.{name}"] = {"action": keyword.action, **data}
    return out


def _flatten_rule(rule: Rule, path: str) -> dict[str, dict[str, Any]]:
    out = {path: meaning(rule)}
    if rule.schema is not None:
        out.update(schema_rules(rule.schema.rules, path))
    if rule.object_rules is not None:
        out.update(flatten(rule.object_rules, path))
    select = rule.select
    if select is not None:
        for value, member in select.rules.items():
            out.update(_flatten_rule(member, f"{path}[{select.key}={value}]"))
        out.update(_flatten_rule(select.unknown, f"{path}[{select.key}=*]"))
    return out


def touched(
    rules: ObjectRules, obj: dict[str, Any], prefix: str = "", known: str | None = None
) -> set[str]:
    """The paths of ``flatten`` that a request body reaches (a case's coverage);
    ``known``: a select's key, not one of the object's fields."""
    found: set[str] = {ANSWERS} if not prefix else set()
    for name, value in obj.items():
        if name == known and name not in rules.rules:
            continue
        path = f"{prefix}.{name}" if prefix else name
        rule = rules.rules.get(name)
        if rule is None:
            found.add(f"{prefix}.(unknown fields)" if prefix else "(unknown fields)")
            continue
        found |= _touched_rule(rule, value, path)
    return found


def _touched_rule(rule: Rule, value: Any, path: str, known: str | None = None) -> set[str]:
    found = {path}
    if rule.schema is not None and isinstance(value, dict):
        found |= set(schema_rules(rule.schema.rules, path))
    select = rule.select
    if select is not None:
        members = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        for member in members:
            if not isinstance(member, dict):
                continue
            chosen = member.get(select.key, select.absent)
            inner = select.rules.get(chosen) if isinstance(chosen, str) else None
            where = f"{path}[{select.key}={chosen if inner is not None else '*'}]"
            found |= _touched_rule(inner or select.unknown, member, where, select.key)
    elif rule.object_rules is not None and isinstance(value, dict):
        found |= touched(rule.object_rules, value, path, known)
    return found


def _contexts(old: Policy, new: Policy) -> list[tuple[str, str | None, str | None]]:
    found: list[tuple[str, str | None, str | None]] = [(BASE, None, None)]
    for kind in ("models", "profiles"):
        names = sorted({*getattr(old.source, kind), *getattr(new.source, kind)})
        for name in names:
            label = f"{kind[:-1]} {name}"
            found.append((label, name, None) if kind == "models" else (label, None, name))
    return found


def _rules(
    policy: Policy, route: str, model: str | None, profile: str | None
) -> dict[str, dict[str, Any]]:
    compiled = policy.route(route, model=model, profile=profile)
    return {} if compiled is None else flatten(compiled)


def effective(rules: dict[str, dict[str, Any]], path: str) -> dict[str, Any] | None:
    """The meaning of ``path`` in ``rules``, or, where they do not name it, the action
    of the rule that decides it (a select's unknown rule, an object's unknown fields)."""
    if path in rules:
        return rules[path]
    if path.endswith("]"):
        at = path.rindex("[")
        key = path[at + 1 : -1].split("=", 1)[0]
        other = rules.get(f"{path[:at]}[{key}=*]")
        if other is not None:
            return {"action": other["action"], NOT_NAMED: f"{key} not named"}
        return None
    head = path.rpartition(".")[0] if not path.endswith(")") else ""
    unknown = rules.get(f"{head}.(unknown fields)" if head else "(unknown fields)")
    if unknown is None:
        return None
    return {"action": unknown["action"], NOT_NAMED: "unknown field"}


def _ancestors(path: str) -> list[str]:
    """The paths that hold ``path`` (``a[k=v].b`` -> ``a``, ``a[k=v]``)."""
    found, depth = [], 0
    for i, c in enumerate(path):
        if c == "[":
            if depth == 0 and i:
                found.append(path[:i])
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "." and depth == 0:
            found.append(path[:i])
    return found


def _same_effect(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    if NOT_NAMED in a or NOT_NAMED in b:
        return bool(a["action"] == b["action"])
    return a == b


def _inside_a_refusal(after: dict[str, Any], path: str) -> bool:
    """Whether a rule holding ``path`` refuses in the new policy: inside what is refused
    nothing else is looked at (that rule's own change, if any, is listed)."""
    for holder in _ancestors(path):
        rule = effective(after, holder)
        if rule is not None and rule["action"] == "reject":
            return True
    return False


def compare_policies(old: Policy, new: Policy) -> list[RuleChange]:
    """Every rule whose meaning differs, route by route, then overlay by overlay (an
    overlay's change listed only where it is not the route's own change)."""
    routes = [*old.routes, *(r for r in new.routes if r not in old.routes)]
    changes: list[RuleChange] = []
    base: dict[tuple[str, str], RuleChange] = {}
    for context, model, profile in _contexts(old, new):
        for route in routes:
            before = _rules(old, route, model, profile)
            after = _rules(new, route, model, profile)
            if not before or not after:
                # A route one policy does not name: forwarded unchecked there. One line.
                if context == BASE:
                    shown = [
                        {"action": "named", "rules": len(r)} if r else {"action": "not named"}
                        for r in (before, after)
                    ]
                    changes.append(RuleChange(context, route, "(the route)", *shown))
                continue
            for path in [*before, *(p for p in after if p not in before)]:
                a, b = effective(before, path), effective(after, path)
                if _same_effect(a, b) or _inside_a_refusal(after, path):
                    if context != BASE and (route, path) in base:
                        # The overlay undoes the route's change here: worth saying.
                        changes.append(RuleChange(context, route, path, a, b))
                    continue
                change = RuleChange(context, route, path, a, b)
                if context == BASE:
                    base[(route, path)] = change
                elif (route, path) in base and base[(route, path)].changes == change.changes:
                    continue
                changes.append(change)
    return changes


# Verdicts of one body.


def verdict(policy: Policy, route: str, body: dict[str, Any], profile: str | None) -> str:
    """``unchanged``, ``changed``, ``fanout N`` or ``refused PARAM CODE``."""
    decision = apply_policy(policy, route, body, profile=profile)
    if decision.error is not None:
        return f"refused '{decision.error.param}' {decision.error.code}"
    if decision.fanout > 1:
        return f"fanout {decision.fanout}"
    return "changed" if decision.changed else "unchanged"


def _kind(verdict: str) -> str:
    return verdict.split(" ", 1)[0]


@dataclass
class BodyComparison:
    """What two policies do to a set of recorded bodies."""

    total: int = 0
    moved: Counter[tuple[str, str]] = field(default_factory=Counter)  # (old, new) verdicts
    rewritten: int = 0  # changed by both, into different bodies

    @property
    def changed(self) -> int:
        """Bodies the two policies treat differently in any way."""
        return sum(self.moved.values()) + self.rewritten

    @property
    def change_verdict(self) -> int:
        """Bodies whose verdict moves between unchanged, changed, fan-out and refused."""
        return sum(n for (a, b), n in self.moved.items() if _kind(a) != _kind(b))

    @property
    def refused_otherwise(self) -> int:
        """Bodies refused by both, with another param or code."""
        return sum(n for (a, b), n in self.moved.items() if _kind(a) == _kind(b))

    def as_dict(self) -> dict[str, Any]:
        return {
            "bodies": self.total,
            "change_verdict": self.change_verdict,
            "refused_otherwise": self.refused_otherwise,
            "forwarded_differently": self.rewritten,
            "moves": [
                {"old": old, "new": new, "count": n} for (old, new), n in self.moved.most_common()
            ],
        }


def compare_bodies(
    old: Policy, new: Policy, bodies: Iterable[tuple[str, str | None, dict[str, Any]]]
) -> BodyComparison:
    """Run each (route, profile, body) through both policies; count what moves."""
    result = BodyComparison()
    for route, profile, body in bodies:
        result.total += 1
        a, b = verdict(old, route, body, profile), verdict(new, route, body, profile)
        if a != b:
            result.moved[(a, b)] += 1
        elif a in ("changed",) or a.startswith("fanout"):
            first = apply_policy(old, route, body, profile=profile).body
            if first != apply_policy(new, route, body, profile=profile).body:
                result.rewritten += 1
    return result
