"""The walk's fast path: whether an object passes its rules as it is, with nothing to record.

Most requests pass the policy untouched: every key's value is of a type its rule
passes, a number within its range, or an array of members (messages, content
parts, Responses input items) or an object that passes the same way. ``passes``
answers that without the full walk (walk.py), which runs only when it says no and
then finds again, and names, whatever is wrong. What an object's signature (its
keys, then its values' types) needs beyond types is worked out once and kept on
its compiled rules (a Plan); a member like one already passed is passed by one
lookup (Shape). tests/policy/test_fuzz.py checks that the two walks decide alike.
"""

from __future__ import annotations

from typing import Any

from gateway.policy.compiled import Dispatch, Members, ObjectRules, Plan, Shape


def passes(compiled: ObjectRules, obj: dict[str, Any], known: str | None = None) -> bool:
    """Whether ``obj`` passes as it is, with no outcome to record: every key's value
    passes its rule's bare type check, or is a number in its range, or an array of
    members (messages, content parts) or an object each of which passes the same way.
    Most requests are done here; anything else (a refusal, a rewrite, a cross-key
    rule) is left to the full walk, which finds it again and names it.

    What an object's keys and their values' types need (the Plan) is worked out once
    per such signature and kept on ``compiled``, so an object like one seen before
    costs a look-up and the checks of its values that need more than their type."""
    if not compiled.plain:
        return False
    signature = (*obj, *map(type, obj.values()))
    plan = compiled.plans.get(signature)
    if plan is None or plan[0] != known:
        plan = _plan(compiled, obj, known, signature)
        if plan is None:
            return False
    for name, what, check in plan[1]:
        value = obj[name]
        if check is _RANGE:
            if not what.least <= value <= what.most:
                return False
        elif check is _MEMBERS:
            if not _members_pass(what, value):
                return False
        elif not passes(what, value, None):
            return False
    return True


_RANGE, _MEMBERS, _INNER = "range", "members", "inner"


def _plan(
    compiled: ObjectRules, obj: dict[str, Any], known: str | None, signature: tuple[Any, ...]
) -> Plan | None:
    """The checks an object of ``obj``'s signature needs beyond its types (None: it
    cannot pass as it is, whatever its values); kept on ``compiled``."""
    rules = compiled.rules
    checks: list[tuple[str, Any, str]] = []
    for name, value in obj.items():
        rule = rules.get(name)
        if rule is None:
            if name != known:
                return None
            continue
        kind = type(value)
        if kind in rule.fast:
            continue
        if kind in rule.ranged:
            checks.append((name, rule, _RANGE))
        elif kind is list and rule.members is not None:
            checks.append((name, rule.members, _MEMBERS))
        elif kind is dict and rule.inner is not None:
            checks.append((name, rule.inner, _INNER))
        else:
            return None
    for name in compiled.required:
        if name not in obj:
            return None
    plan = (known, tuple(checks))
    if len(compiled.plans) < ObjectRules.MOST_PLANS:
        compiled.plans[signature] = plan
    return plan


def _members_pass(members: Members, value: list[Any]) -> bool:
    size = len(value)
    if size < members.least or (members.most is not None and size > members.most):
        return False
    dispatch = members.dispatch
    key, absent, shapes = dispatch.key, dispatch.absent, dispatch.shapes
    try:
        for member in value:
            # _member_pass written out for the common case, a member one select
            # dispatches to a Shape. A member that is not an object has no ``get``
            # (AttributeError), a key value that is not a string is not in ``shapes``
            # (or not hashable: TypeError): then the full walk names what is wrong.
            shape = shapes.get(member.get(key, absent))
            if isinstance(shape, Shape):
                signature = (*member, *map(type, member.values()))
                if signature not in shape.seen and not _member_passes(
                    shape, member, key, signature
                ):
                    return False
            elif shape is None or type(member) is not dict or not _member_pass(shape, member):
                return False
    except (AttributeError, TypeError):
        return False
    return True


def _member_pass(dispatch: Dispatch, member: dict[str, Any]) -> bool:
    key = dispatch.key
    chosen = member.get(key, dispatch.absent)  # (a key present but null: None)
    if type(chosen) is not str:
        return False
    shape = dispatch.shapes.get(chosen)
    if isinstance(shape, Shape):
        signature = (*member, *map(type, member.values()))
        return signature in shape.seen or _member_passes(shape, member, key, signature)
    return shape is not None and _member_pass(shape, member)


def _member_passes(
    shape: Shape, member: dict[str, Any], key: str, signature: tuple[Any, ...]
) -> bool:
    fast = shape.fast
    for name, inner in member.items():
        kinds = fast.get(name)
        if kinds is None or type(inner) not in kinds:
            # More than a type check (content parts): the member's own fast walk.
            return passes(shape.rules, member, key)
    for name in shape.required:
        if name not in member:
            return False
    if len(shape.seen) < Shape.MOST_SEEN:
        shape.seen.add(signature)
    return True
