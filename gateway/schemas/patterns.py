"""Regular expressions of a shape that backtracks catastrophically.

A pattern in a schema ends up in an engine's grammar compiler or regex engine (and in
the gateway's validator, on the answer). The shapes that take a backtracking engine
exponential time are known: a repeated group whose body can itself repeat without
bound (``(a+)+``, ``(a*)*b``, ``(\\w+\\s?)*$``), or whose alternatives can match the same
text (``(a|a)*``, ``(a|ab)*``). This is a conservative scan of the pattern's text
(ECMA-262 syntax, as JSON Schema's patterns are): it finds every group, whether it is
repeated, and what its body holds; it does not prove a pattern safe, it refuses the
shapes that are not. A pattern that is not a regular expression at all is the
validator's to name (invalid_json_schema).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Group:
    start: int
    unbounded: bool = False  # its body holds a quantifier with no upper bound
    branches: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)


def _quantifier(pattern: str, at: int) -> tuple[int, bool, bool] | None:
    """The quantifier at ``at`` (its length, whether it repeats more than once, whether it
    has no upper bound), or None."""
    char = pattern[at] if at < len(pattern) else ""
    if char in "*+":
        size = 1
        unbounded, repeats = True, True
    elif char == "?":
        return 1, False, False
    elif char == "{":
        end = pattern.find("}", at)
        inner = pattern[at + 1 : end] if end > 0 else ""
        low, comma, high = inner.partition(",")
        if end < 0 or not low.strip().isdigit() or (high.strip() and not high.strip().isdigit()):
            return None  # a literal brace
        size = end - at + 1
        unbounded = bool(comma) and not high.strip()
        repeats = unbounded or int(high or low) > 1
    else:
        return None
    if at + size < len(pattern) and pattern[at + size] == "?":
        size += 1  # lazy: the same backtracking
    return size, repeats, unbounded


def unsafe_shape(pattern: str) -> str | None:
    """What makes ``pattern`` backtrack catastrophically (words for the error), or None."""
    stack: list[_Group] = [_Group(-1)]
    at = 0
    in_class = False
    while at < len(pattern):
        char = pattern[at]
        top = stack[-1]
        if char == "\\":
            top.current.append(pattern[at : at + 2])
            at += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            top.current.append(char)
            at += 1
            continue
        if char == "[":
            in_class = True
            top.current.append(char)
            at += 1
            continue
        if char == "(":
            stack.append(_Group(at))
            at += 1
            continue
        if char == "|":
            top.branches.append("".join(top.current))
            top.current = []
            at += 1
            continue
        if char == ")" and len(stack) > 1:
            group = stack.pop()
            group.branches.append("".join(group.current))
            quantifier = _quantifier(pattern, at + 1)
            text = pattern[group.start : at + 1]
            if quantifier is not None and quantifier[1]:
                if group.unbounded:
                    return f"repeats the group {text!r}, which itself repeats without bound"
                if _overlapping(group.branches):
                    return f"repeats the group {text!r}, whose alternatives can match the same text"
            outer = stack[-1]
            outer.unbounded = outer.unbounded or group.unbounded
            if quantifier is not None:
                outer.unbounded = outer.unbounded or quantifier[2]
                at += quantifier[0]
            outer.current.append(text)
            at += 1
            continue
        quantifier = _quantifier(pattern, at)
        if quantifier is not None:
            top.unbounded = top.unbounded or quantifier[2]
            at += quantifier[0]
            continue
        top.current.append(char)
        at += 1
    return None


def _overlapping(branches: list[str]) -> bool:
    """Whether two alternatives can begin the same way: one equal to or a prefix of
    another (``a|a``, ``a|ab``), or either one able to match anything (``.``)."""
    if len(branches) < 2:
        return False
    for i, one in enumerate(branches):
        for other in branches[i + 1 :]:
            if one.startswith(other) or other.startswith(one):
                return True
            if one[:1] == "." or other[:1] == ".":
                return True
    return False
