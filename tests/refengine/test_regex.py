"""Strings drawn from a pattern match it in full; patterns outside the subset are refused."""

from __future__ import annotations

import re

import pytest

from refengine.structured.regex import MAX_PATTERN, OPEN_REPEATS, PatternError, draw, parse
from sampler.draws import Draws

MATCHING = [
    "^[A-Z]{3}-\\d{4}$",
    "[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,4}",
    "^(\\([0-9]{3}\\))?[0-9]{3}-[0-9]{4}$",
    "(?:cat|dog|bird)s?",
    "(?P<year>\\d{4})-(?P<month>0[1-9]|1[0-2])",
    "a{2,}b{0,3}c+?d*",
    "[^a-z\\s]{5}",
    "\\w\\W\\S\\D.",
    "[\\]\\-x]{3}",
    "\\x41\\u00e9\\t\\.\\*",
    "[-a]b[a-]",
    "x{,3}",  # {0,3}, as Python reads it
    "x{a}",  # not a bound: the literal characters
    "",
]
REFUSED = [
    ("(?=a)b", "lookaround"),
    ("(?!a)", "lookaround"),
    ("(?i)abc", "flags"),
    ("(a)\\1", "backreference"),
    ("\\bword\\b", "boundary"),
    ("a++", "possessive"),
    ("a**", "repeat of a repeat"),
    ("*a", "nothing to repeat"),
    ("(ab", "not closed"),
    ("ab)", "unbalanced"),
    ("[z-a]", "out of order"),
    ("a{5,2}", "out of order"),
    ("[[:alpha:]]", "POSIX"),
    ("\\x4", "hex digits"),
    ("a" * (MAX_PATTERN + 1), "longer than"),
]


@pytest.mark.parametrize("pattern", MATCHING)
def test_drawn_strings_match_in_full(pattern: str) -> None:
    tree = parse(pattern)
    drawn = {draw(tree, Draws(seed)) for seed in range(60)}
    for text in drawn:
        assert re.fullmatch(pattern, text, flags=re.ASCII), (pattern, text)


def test_open_repeats_are_bounded_and_varied() -> None:
    sizes = {len(draw(parse("a+"), Draws(seed))) for seed in range(100)}
    assert sizes == set(range(1, OPEN_REPEATS + 2))


def test_a_seed_replays() -> None:
    tree = parse("[a-z]{8}")
    assert draw(tree, Draws(7)) == draw(tree, Draws(7)) != draw(tree, Draws(8))


@pytest.mark.parametrize(("pattern", "why"), REFUSED)
def test_patterns_outside_the_subset_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(PatternError, match=why):
        parse(pattern)
