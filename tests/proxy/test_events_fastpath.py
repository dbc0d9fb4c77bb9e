"""The reader's fast path for plain ``data:`` events agrees with its general walk."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.proxy.events import EventReader

# Pieces a stream is made of: good events, broken ones, error events, [DONE],
# and the shapes only the general walk handles (comments, other fields, blank
# line runs, multi-line data, no space after the colon).
PIECES = [
    b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n',
    b"data: {}\n\n",
    b"data: [DONE]\n\n",
    b"data: {not json}\n\n",
    b"data: [1, 2]\n\n",
    b'data: {"error": {"message": "boom", "code": 500}}\n\n',
    b"data: \n\n",
    b"data:{}\n\n",
    b": keep-alive\n\n",
    b"event: message\ndata: {}\n\n",
    b'data: {"a":\ndata: 1}\n\n',
    b"\n\n",
    b"\n",
    b"error: {}\n\n",
    b"nonsense\n\n",
]


def outcome(
    reader: EventReader, result: tuple[bytes, list[object], object]
) -> tuple[bytes, list[object], str, bool]:
    events, parsed, error = result
    return events, parsed, type(error).__name__ + str(error), reader.done


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8))
def test_fast_path_matches_the_general_walk(pieces: list[bytes]) -> None:
    block = b"".join(pieces)
    if not block.endswith(b"\n\n"):
        block += b"\n\n"
    fast, general = EventReader(), EventReader()
    checked = fast._checked_simple(block, None)
    expected = outcome(general, general._checked_lines(block, None))
    if checked is not None:
        assert outcome(fast, checked) == expected
    # And whichever path it takes, feeding the block gives the general walk's answer.
    fed = EventReader()
    assert outcome(fed, fed.feed(block)) == expected


def test_plain_events_take_the_fast_path() -> None:
    block = PIECES[0] * 3 + PIECES[2]
    assert EventReader()._checked_simple(block, None) == (
        block,
        [{"choices": [{"delta": {"content": "x"}}]}] * 3,
        None,
    )
