"""A policy's rules compiled for the walk: plain slotted objects, built once at load.

The pydantic models of file.py are the file as written; the walk (walk.py)
reads these instead, so what it needs per field (the action, the types that
pass with no further check, whether to look inside, whether a refusal is
enforced or only reported) is one attribute read away and nothing is cached
inside the config models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequest
from gateway.policy.file import FieldRule, Select, UnknownAction


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
        "nested",
        "report",
        "check",
        "is_neutral",
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
        self.nested = (
            self.object_rules is not None or self.select is not None or self.token_ids is not None
        )
        # The value types this rule forwards as they are with no further work: a
        # pass rule's bare type check, not null when required, nothing inside.
        fast: frozenset[type] = frozenset()
        if self.action == "pass":
            fast = self.accepts - {type(None)} if self.required else self.accepts
            if self.nested:
                fast = fast - {list, dict}
        self.fast = fast
        self.check: Callable[[Any, str], InvalidRequest | None] = source.check
        self.is_neutral: Callable[[Any], bool] = source.is_neutral


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


class ObjectRules:
    """The rules of an object's keys, compiled for the walk."""

    __slots__ = ("rules", "unknown", "required", "defaults", "requires", "plain", "report")

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
        # No defaults and no cross-key rules: an object whose every key passes its
        # rule's bare type check needs no more (the fast path of walk_object).
        self.plain = not self.defaults and not self.requires
        # Whether a key that ``unknown`` refuses is only reported.
        self.report = report


def compile_rules(
    rules: dict[str, FieldRule], unknown: UnknownAction, *, report: bool = False
) -> ObjectRules:
    """ObjectRules for ``rules`` (keys not named follow ``unknown``); ``report``: the
    enforcement of every rule that does not set its own."""
    return ObjectRules(
        {name: Rule(rule, report=report) for name, rule in rules.items()}, unknown, report=report
    )
