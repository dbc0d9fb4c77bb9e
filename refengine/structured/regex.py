"""Strings drawn from a regular expression: the subset JSON-Schema grammars compile.

A grammar backend turns ``pattern`` into a grammar and the model walks it; here the
pattern is parsed into a small tree (characters sets, sequences, alternatives,
repeats) and a string is drawn from it with the row's draws, so it matches in full.
The subset: literals and escapes (``\\d \\w \\s``, their negations, ``\\n \\t \\xhh
\\uhhhh``, an escaped punctuation character), ``.``, classes with ranges and negation,
groups (plain, ``(?:``, named), alternation, the quantifiers ``* + ? {n} {n,} {n,m}``
(``{,m}`` as Python reads it, ``{0,m}``)
(lazy or not), and ``^``/``$``. Lookarounds, backreferences, word boundaries and inline
flags are outside it: ``parse`` refuses them (PatternError), as llguidance refuses
lookarounds. Unbounded repeats stop after ``OPEN_REPEATS`` more than their minimum.
Only printable ASCII is drawn, so ``.`` and negated classes choose from it.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from sampler.draws import Draws

OPEN_REPEATS = 6  # a ``*``, ``+`` or ``{n,}`` draws at most this many beyond its minimum
MAX_PATTERN = 1000  # characters; longer patterns are refused
MAX_REPEAT = 1000  # the largest bound of a {n,m}
_PRINTABLE = tuple(chr(c) for c in range(0x20, 0x7F))
_DIGITS = tuple(string.digits)
_WORDS = tuple(string.ascii_letters + string.digits + "_")
_SPACES = (" ",)  # \s draws a space (it matches any whitespace)
_CLASSES = {"d": _DIGITS, "w": _WORDS, "s": (" ", "\t", "\n", "\r", "\f", "\v")}
_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


class PatternError(ValueError):
    """A pattern outside the subset (or not a regular expression at all)."""


@dataclass(frozen=True)
class Chars:
    """One character from ``options`` (sorted, so a draw is the same in every process)."""

    options: tuple[str, ...]


@dataclass(frozen=True)
class Seq:
    """The parts one after another."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """One of the branches."""

    branches: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """``node`` between ``low`` and ``high`` times (None: unbounded)."""

    node: Node
    low: int
    high: int | None


Node = Chars | Seq | Alt | Repeat


def parse(pattern: str) -> Node:
    """The pattern's tree; PatternError when it is outside the subset."""
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"pattern longer than {MAX_PATTERN} characters")
    parser = _Parser(pattern)
    node = parser.alternation()
    if parser.at < len(pattern):
        raise PatternError(f"unbalanced ')' at {parser.at}")
    return node


def draw(node: Node, draws: Draws) -> str:
    """A string the tree matches in full."""
    out: list[str] = []
    _draw(node, draws, out)
    return "".join(out)


def _draw(node: Node, draws: Draws, out: list[str]) -> None:
    if isinstance(node, Chars):
        if node.options:
            out.append(node.options[draws.pick(len(node.options))])
    elif isinstance(node, Seq):
        for part in node.parts:
            _draw(part, draws, out)
    elif isinstance(node, Alt):
        _draw(node.branches[draws.pick(len(node.branches))], draws, out)
    else:
        high = node.low + OPEN_REPEATS if node.high is None else node.high
        for _ in range(draws.integer(node.low, high)):
            _draw(node.node, draws, out)


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0

    def _peek(self) -> str | None:
        return self.pattern[self.at] if self.at < len(self.pattern) else None

    def _take(self) -> str:
        if self.at >= len(self.pattern):
            raise PatternError("the pattern ends in the middle of a construct")
        char = self.pattern[self.at]
        self.at += 1
        return char

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def sequence(self) -> Node:
        parts: list[Node] = []
        while (char := self._peek()) is not None and char not in "|)":
            atom = self.atom()
            if atom is not None:
                parts.append(self.quantified(atom))
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

    def atom(self) -> Node | None:
        char = self._take()
        if char in "^$":
            return None  # anchors: the whole string is drawn, so they hold
        if char == "(":
            self._group_head()
            inner = self.alternation()
            if self._peek() != ")":
                raise PatternError("a group is not closed")
            self.at += 1
            return inner
        if char == "[":
            return self._class()
        if char == ".":
            return Chars(tuple(c for c in _PRINTABLE if c != "\n"))
        if char == "\\":
            return self._escape(in_class=False)
        if char in "*+?{":
            if char == "{" and not self._looks_like_bound(self.at):
                return Chars((char,))
            raise PatternError(f"nothing to repeat at {self.at - 1}")
        return Chars((char,))

    def _group_head(self) -> None:
        if self._peek() != "?":
            return
        self.at += 1
        kind = self._take()
        if kind == ":":
            return
        if kind == "P" and self._peek() == "<":
            self.at += 1
            kind = "<"
        if kind == "<" and self._peek() not in ("=", "!"):
            end = self.pattern.find(">", self.at)
            if end < 0 or not self.pattern[self.at : end].isidentifier():
                raise PatternError("a named group without a valid name")
            self.at = end + 1
            return
        raise PatternError(f"(?{kind}...) (lookaround, flags or the like) is not supported")

    def _looks_like_bound(self, start: int) -> bool:
        """Whether ``{`` just before ``start`` opens a repeat bound ({n}, {n,}, {n,m})."""
        end = self.pattern.find("}", start)
        body = self.pattern[start:end] if end >= 0 else ""
        low, comma, high = body.partition(",")
        # {,m} is {0,m}, as Python's re (the validators') reads it.
        return bool((low.isdigit() or (comma and high.isdigit())) and (not high or high.isdigit()))

    def quantified(self, atom: Node) -> Node:
        char = self._peek()
        if char == "*":
            low, high = 0, None
        elif char == "+":
            low, high = 1, None
        elif char == "?":
            low, high = 0, 1
        elif char == "{" and self._looks_like_bound(self.at + 1):
            end = self.pattern.index("}", self.at)
            first, comma, second = self.pattern[self.at + 1 : end].partition(",")
            low = int(first or 0)
            high = int(second) if second else (None if comma else low)
            if (high is not None and high < low) or max(low, high or 0) > MAX_REPEAT:
                raise PatternError(f"a repeat bound out of order or above {MAX_REPEAT}")
            self.at = end
        else:
            return atom
        self.at += 1
        if self._peek() == "?":
            self.at += 1  # lazy: the same strings
        elif self._peek() == "+":
            raise PatternError("possessive quantifiers are not supported")
        if self._peek() in ("*", "+", "?"):
            raise PatternError(f"a repeat of a repeat at {self.at}")
        return Repeat(atom, low, high)

    def _escape(self, *, in_class: bool) -> Chars:
        char = self._take()
        lower = char.lower()
        if lower in _CLASSES:
            chosen = _CLASSES[lower]
            if char.isupper():
                return Chars(tuple(c for c in _PRINTABLE if c not in chosen))
            return Chars(_SPACES if lower == "s" and not in_class else chosen)
        if char in _CONTROL:
            return Chars((_CONTROL[char],))
        if char in "xu":
            width = 2 if char == "x" else 4
            digits = self.pattern[self.at : self.at + width]
            if len(digits) != width or any(d not in string.hexdigits for d in digits):
                raise PatternError(f"\\{char} needs {width} hex digits")
            self.at += width
            return Chars((chr(int(digits, 16)),))
        if char.isalnum():
            raise PatternError(
                f"\\{char} (a boundary, a backreference or the like) is not supported"
            )
        return Chars((char,))

    def _class(self) -> Chars:
        negate = self._peek() == "^"
        if negate:
            self.at += 1
        members: set[str] = set()
        first = True
        while True:
            char = self._take()
            if char == "]" and not first:
                break
            first = False
            if char == "\\":
                start = self._escape(in_class=True).options
            elif char == "[" and self._peek() == ":":
                raise PatternError("POSIX classes ([:alpha:]) are not supported")
            else:
                start = (char,)
            if len(start) == 1 and self._peek() == "-" and self.pattern[self.at + 1 : self.at + 2]:
                if self.pattern[self.at + 1] != "]":
                    self.at += 1
                    end_char = self._take()
                    end = self._escape(in_class=True).options if end_char == "\\" else (end_char,)
                    if len(end) != 1 or ord(end[0]) < ord(start[0]):
                        raise PatternError("a class range out of order")
                    members.update(chr(c) for c in range(ord(start[0]), ord(end[0]) + 1))
                    continue
            members.update(start)
        if negate:
            return Chars(tuple(c for c in _PRINTABLE if c not in members))
        return Chars(tuple(sorted(members)))
