"""The affinity key: which source wins, and what the content hash covers."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.routes import ROUTES, guess_route
from gateway.routing.affinity import affinity_key
from gateway.routing.config import Affinity
from gateway.routing.hint import BATCH, INTERACTIVE, NO_HINT, Hinter

SYSTEM = {"role": "system", "content": "You are terse."}
TURN1 = [SYSTEM, {"role": "user", "content": "hi"}]
TURN2 = [*TURN1, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
DEFAULT = Affinity()


def key(body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None, **kw: Any) -> Any:
    config = Affinity(**kw) if kw else DEFAULT
    # The content field is the route's: the route the body is meant for.
    content = ROUTES[guess_route(body)].content
    return affinity_key(body, headers or [], client="alice", config=config, content=content)


@pytest.mark.parametrize(
    ("body", "headers", "source"),
    [
        (
            {"messages": TURN1, "prompt_cache_key": "conv-1"},
            [(b"x-session-id", b"s")],
            "prompt_cache_key",
        ),
        ({"messages": TURN1, "prompt_cache_key": ""}, [(b"x-session-id", b"s")], "header"),
        ({"messages": TURN1, "prompt_cache_key": 7}, [], "content"),
        ({"messages": TURN1}, [(b"x-session-id", b"")], "content"),
        ({"prompt": "Once upon a time"}, [], "content"),
        ({"prompt": ["Once upon a time", "other"]}, [], "content"),
        ({"prompt": [1, 2, 3]}, [], "content"),
        ({"prompt": []}, [], None),
        ({"model": "m"}, [], None),
    ],
)
def test_the_first_present_source_wins(
    body: dict[str, Any], headers: list[tuple[bytes, bytes]], source: str | None
) -> None:
    found = key(body, headers)
    assert (found[0] if found else None) == source


def test_the_same_conversation_keeps_its_key_across_turns() -> None:
    assert key({"messages": TURN1}) == key({"messages": TURN2})


def test_the_content_key_covers_the_whole_system_prompt_and_first_message() -> None:
    other_system = [{"role": "system", "content": "You are verbose."}, TURN1[1]]
    other_first = [SYSTEM, {"role": "user", "content": "hey"}]
    keys = {key({"messages": m}) for m in (TURN1, other_system, other_first)}
    assert len(keys) == 3
    # With two leading messages, the second turn's key differs from the first's.
    assert key({"messages": TURN1}, leading_messages=2) != key(
        {"messages": TURN2}, leading_messages=2
    )


def test_sources_are_only_those_configured_in_their_order() -> None:
    body = {"messages": TURN1, "prompt_cache_key": "conv-1"}
    assert key(body, keys=["api_key", "prompt_cache_key"])[0] == "api_key"
    assert key(body, [(b"x-conv", b"c")], keys=["header"], header="X-Conv")[0] == "header"
    assert key(body, keys=["header"]) is None
    assert affinity_key(body, [], client=None, config=Affinity(keys=["api_key"])) is None


def test_the_same_key_from_different_sources_differs() -> None:
    by_field = key({"prompt_cache_key": "abc"})
    by_header = key({}, [(b"x-session-id", b"abc")])
    assert by_field is not None and by_header is not None
    assert by_field[1] != by_header[1]


def test_a_huge_integer_gives_no_content_key() -> None:
    assert key({"messages": [{"role": "user", "content": 2**70}]}) is None


def test_the_hinter_sets_priority_by_profile() -> None:
    hinter = Hinter(DEFAULT, low_priority_profiles=frozenset({"batch"}))
    hint = hinter.hint({"messages": TURN1}, [], client="k", profile="batch")
    assert hint.source == "content" and hint.priority == BATCH
    assert hinter.hint({"model": "m"}, [], client=None, profile=None) is NO_HINT
    plain = Hinter(None, low_priority_profiles=frozenset({"batch"}))
    assert plain.hint({"messages": TURN1}, [], client=None, profile="gold") is NO_HINT
    assert plain.hint({}, [], client=None, profile="batch").priority == BATCH
    assert plain.hint({}, [], client=None, profile=None).priority == INTERACTIVE
