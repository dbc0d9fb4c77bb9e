"""A policy's rules compiled for the walk: plain slotted objects, built once at load.

The pydantic models of file.py are the file as written; the walk (walk.py)
reads these instead, so what it needs per field (the action, the types that
pass with no further check, whether to look inside, whether a refusal is
enforced or only reported) is one attribute read away and nothing is cached
inside the config models.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest
from gateway.policy.file import FieldRule, Select, UnknownAction
from gateway.schemas.check import SchemaCheck
from gateway.schemas.expect import ASKING, Answers


class Rule:
    """One field's rule (or a select's rule for one member), compiled."""

    __slots__ = (
        "source",
        "action",
        "accepts",
        "fast",
        "required",
        "drop_neutral",
        "to",
        "value",
        "requires",
        "object_rules",
        "select",
        "token_ids",
        "schema",
        "nested",
        "report",
        "check",
        "is_neutral",
        "members",
        "inner",
        "ranged",
        "least",
        "most",
    )

    def __init__(self, source: FieldRule, *, report: bool) -> None:
        self.source = source
        self.action = source.action
        self.accepts = source.accepts
        self.required = source.required
        self.drop_neutral = source.drop_neutral
        self.to = source.to
        self.value: Any = source.value if source.has_value else None
        self.requires = source.requires
        if source.enforcement is not None:
            report = source.enforcement == "report"
        # report: a refusal by this rule (or inside its value) is recorded, not enforced.
        self.report = report
        self.object_rules = (
            compile_rules(source.fields, source.unknown_fields, report=report)
            if source.fields is not None
            else None
        )
        self.select = (
            CompiledSelect(source.select, report=report) if source.select is not None else None
        )
        # An embeddings input given as token ids: its own rule (file.py, token_ids).
        self.token_ids = (
            Rule(source.token_ids, report=report) if source.token_ids is not None else None
        )
        # A JSON Schema as the value (a response format's, a tool's parameters): checked
        # where it stands (gateway/schemas/check.py), so never by a bare type check.
        self.schema = SchemaCheck(source.json_schema) if source.json_schema is not None else None
        self.nested = (
            self.object_rules is not None
            or self.select is not None
            or self.token_ids is not None
            or self.schema is not None
        )
        # The value types this rule forwards as they are with no further work: a
        # pass rule's bare type check, not null when required, nothing inside.
        fast: frozenset[type] = frozenset()
        # What the fast walk (fastwalk.py:passes) may look inside without the full walk:
        # an array of objects chosen by a select whose own check is its length at most
        # (``members``), an object under ``fields`` (``inner``).
        self.members: Members | None = None
        self.inner: ObjectRules | None = None
        # A number whose only constraint is its range: the types, and the finite bounds
        # (a NaN or an infinity is outside them, so the full check names it).
        self.ranged: frozenset[type] = frozenset()
        self.least: float = -sys.float_info.max
        self.most: float = sys.float_info.max
        if self.action == "pass" and not self.requires:
            fast = self.accepts - {type(None)} if self.required else self.accepts
            if self.nested:
                fast = fast - {list, dict}
            items = source.items
            if (
                self.select is not None
                and self.token_ids is None
                and list in source.types
                and source.enum is None
                and (items is None or dict in items.accepts)
            ):
                self.members = Members(self.select, source.min_items, source.max_items)
            if self.object_rules is not None and dict in self.accepts:
                self.inner = self.object_rules
            if not self.nested and _range_only(source):
                self.ranged = source.types
                if source.minimum is not None:
                    self.least = source.minimum
                if source.maximum is not None:
                    self.most = source.maximum
        self.fast = fast
        self.check: Callable[[Any, str], InvalidRequest | None] = source.check
        self.is_neutral: Callable[[Any], bool] = source.is_neutral


def _range_only(source: FieldRule) -> bool:
    return (
        bool(source.types)
        and source.types <= _NUMBERS
        and source.enum is None
        and source.values is None
        and source.items is None
        and source.min_items is None
        and source.max_items is None
        and source.min_length is None
        and source.max_length is None
        and source.pattern is None
    )


_NUMBERS = frozenset((int, float))


class Members:
    """An array the fast walk checks member by member: its length bounds, and each
    member's rule by its key's value (only rules that pass a member as it is)."""

    __slots__ = ("dispatch", "least", "most")

    def __init__(self, select: CompiledSelect, least: int | None, most: int | None) -> None:
        self.dispatch = Dispatch(select)
        self.least = least or 0
        self.most = most


class Dispatch:
    """A select, for the fast walk: by its key's value (``absent`` where the key is not
    there), the Shape a member passes as it is, or another Dispatch where that rule
    selects again on the same member (a Responses input item: by type, then role)."""

    __slots__ = ("key", "absent", "shapes")

    def __init__(self, select: CompiledSelect) -> None:
        self.key = select.key
        self.absent = select.absent
        self.shapes: dict[str, Shape | Dispatch] = {}
        for value, rule in select.rules.items():
            if rule.action != "pass" or dict not in rule.accepts:
                continue
            if rule.select is None and rule.object_rules is not None and rule.object_rules.plain:
                self.shapes[value] = Shape(self.key, rule.object_rules)
            elif rule.select is not None and rule.object_rules is None:
                self.shapes[value] = Dispatch(rule.select)


class Shape:
    """What a member passes as it is under one rule of a select (a message of one
    role): the types each key's value may have with no more work (the select's key a
    string), the keys required, the member's rules (for a value that needs more than
    a type check, such as content parts), and the signatures (its keys, then the
    types of their values) of members already found to pass by type checks alone:
    such a member passes whatever its values, so one like it is passed by one lookup.
    Only keys the rules name can be in a signature, so the set stays small; it is
    bounded all the same."""

    __slots__ = ("fast", "required", "rules", "seen")
    MOST_SEEN = 256

    def __init__(self, key: str, rules: ObjectRules) -> None:
        self.fast = {name: rule.fast for name, rule in rules.rules.items()}
        self.fast[key] = frozenset((str,))
        self.required = rules.required
        self.rules = rules
        self.seen: set[tuple[Any, ...]] = set()


class CompiledSelect:
    """A ``select``, compiled: the rule of each value of its key."""

    __slots__ = ("key", "rules", "unknown", "absent", "supported", "report", "passed")

    def __init__(self, source: Select, *, report: bool) -> None:
        self.key = source.key
        self.rules = {value: Rule(r, report=report) for value, r in source.rules.items()}
        self.unknown = Rule(source.unknown, report=report)
        self.absent = source.absent
        # The values a client may send, for the error that refuses another one.
        self.supported = [v for v, r in source.rules.items() if r.action != "reject"]
        # A member that is not an object is refused under the select's own rule.
        self.report = report
        # The fast path of _select_members: by key value, the member rules that pass a
        # member and check its keys (their keys' rules, and the member types that need
        # no further check).
        self.passed = {
            value: (rule.object_rules, rule.accepts)
            for value, rule in self.rules.items()
            if rule.action == "pass" and rule.object_rules is not None and rule.select is None
        }


# The fast walk's plan for one signature of an object: the key its caller deals with
# (a select's), and each key whose value needs a check beyond its type, with what it is
# checked against and how: "range" (its Rule's bounds), "members" (a Members), "inner"
# (an object's ObjectRules).
Plan = tuple[str | None, tuple[tuple[str, Any, str], ...]]


class ObjectRules:
    """The rules of an object's keys, compiled for the walk."""

    __slots__ = (
        "rules",
        "unknown",
        "required",
        "defaults",
        "requires",
        "plain",
        "report",
        "plans",
        "answers",
    )
    # Signatures (keys, then their values' types) an object may take are bounded by the
    # rules' keys; the plans kept are bounded all the same.
    MOST_PLANS = 1024

    def __init__(
        self,
        rules: dict[str, Rule],
        unknown: UnknownAction,
        *,
        report: bool,
    ) -> None:
        self.rules = rules
        self.unknown = unknown
        self.required = tuple(n for n, r in rules.items() if r.required)
        self.defaults = tuple((n, r.value) for n, r in rules.items() if r.action == "default")
        self.requires = tuple((n, r) for n, r in rules.items() if r.requires)
        # No defaults: an object whose every key passes its rule's fast check needs no
        # more (the fast path of walk_object). A key with a cross-key rule (``requires``)
        # has no fast check, so its presence sends the object to the full walk.
        self.plain = not self.defaults
        # Whether a key that ``unknown`` refuses is only reported.
        self.report = report
        # By signature, what the fast walk checks beyond types (fastwalk.py:passes).
        self.plans: dict[tuple[Any, ...], Plan] = {}
        # A request body's rules only: the answer checks in force (None: all off).
        self.answers: Answers | None = None

    def check_answers(self, answers: Answers | None) -> None:
        """Turn the answer checks on (``answers``): the fields an expectation reads then
        never take the fast walk, so that the full walk, and only it, builds one."""
        self.answers = answers
        if answers is None:
            return
        for name in ASKING:
            rule = self.rules.get(name)
            if rule is not None:
                rule.fast = frozenset()
                rule.ranged = frozenset()
                rule.members = None
                rule.inner = None
        self.plans.clear()


def compile_rules(
    rules: dict[str, FieldRule], unknown: UnknownAction, *, report: bool = False
) -> ObjectRules:
    """ObjectRules for ``rules`` (keys not named follow ``unknown``); ``report``: the
    enforcement of every rule that does not set its own."""
    return ObjectRules(
        {name: Rule(rule, report=report) for name, rule in rules.items()}, unknown, report=report
    )
