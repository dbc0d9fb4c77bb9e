"""The answer's text, piece by piece (pure): a leading <think> block split off, and stop
sequences matched by the gateway; each checked on every way a stream can cut the text."""

from __future__ import annotations

import pytest

from gateway.messages.text import TEXT, THINKING, InlineThinking, Piece, StopMatcher


def cuts(text: str) -> list[list[str]]:
    """``text`` whole, in one-character pieces, and cut in two at every place."""
    return [[text], list(text), *([text[:i], text[i:]] for i in range(1, len(text)))]


def joined(pieces: list[Piece]) -> tuple[str, str]:
    return (
        "".join(p for kind, p in pieces if kind == THINKING),
        "".join(p for kind, p in pieces if kind == TEXT),
    )


@pytest.mark.parametrize(
    ("text", "thought", "answer"),
    [
        ("<think>\nA plan.\n</think>\n\nThe answer.", "A plan.", "The answer."),
        ("<think>\n\n</think>\n\nThe answer.", "", "The answer."),
        ("<think>Two\nlines</think>Answer", "Two\nlines", "Answer"),
        ("No thought here.", "", "No thought here."),
        ("<thin", "", "<thin"),  # a tag that never came: text
        (" <think>not at the start</think>", "", " <think>not at the start</think>"),
        ("<think>\nCut short", "Cut short", ""),  # max_tokens inside the thought
        ("<think>a</think>\n\nB <think> c", "a", "B <think> c"),
    ],
)
def test_a_leading_think_block_is_the_thought(text: str, thought: str, answer: str) -> None:
    for pieces in cuts(text):
        inline = InlineThinking()
        out = [p for piece in pieces for p in inline.feed(piece)] + inline.finish()
        assert joined(out) == (thought, answer), pieces
        assert all(p for _, p in out)  # no empty pieces


def test_the_thought_goes_out_as_it_comes() -> None:
    inline = InlineThinking()
    assert inline.feed("<think>\nFirst") == [(THINKING, "First")]
    assert inline.feed(" second </") == [(THINKING, " second ")]
    assert inline.feed("think>\n\nOut") == [(TEXT, "Out")]
    assert inline.feed(" now") == [(TEXT, " now")]


@pytest.mark.parametrize(
    ("stops", "text", "answer", "matched"),
    [
        (["END"], "one two END three", "one two ", "END"),
        (["END"], "one two three", "one two three", None),
        (["\n\nHuman:", "STOP"], "Hi.\n\nHuman: more", "Hi.", "\n\nHuman:"),
        # The first match in the text wins, whichever sequence it is.
        (["two", "one"], "zero one two", "zero ", "one"),
        (["aab"], "aaab", "a", "aab"),
        (["END"], "EN", "EN", None),  # a prefix at the end that never completed
        ([], "free text", "free text", None),
    ],
)
def test_stop_sequences_end_the_text_and_say_which(
    stops: list[str], text: str, answer: str, matched: str | None
) -> None:
    for pieces in cuts(text):
        matcher = StopMatcher(stops)
        out = "".join(matcher.feed(p) for p in pieces) + matcher.finish()
        assert (out, matcher.matched) == (answer, matched), pieces


def test_only_a_tail_that_could_begin_a_stop_sequence_is_held() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("Hello ST") == "Hello "
    assert matcher.feed("ART") == "START"
    assert matcher.feed(" and STO") == " and "
    assert matcher.feed("P, more") == ""
    assert matcher.matched == "STOP" and matcher.feed("ignored") == ""
