"""The ring: stable owners, only a joining or leaving member's share of keys moves,
and with the load bound no member carries more than the bound."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.routing.pickers import bounded_affinity, least_in_flight
from gateway.routing.ring import Ring, key_hash, load_bound

KEYS = [key_hash(f"conversation-{i}".encode()) for i in range(20_000)]


@dataclass(eq=False)
class Member:
    url: str
    in_flight: int = 0
    draining: bool = False
    out: bool = False

    @property
    def in_service(self) -> bool:
        return not self.out


def ring_of(members: list[Member]) -> Ring[Member]:
    return Ring(members, name=lambda m: m.url)


def owners(ring: Ring[Member]) -> list[str]:
    return [ring.owner(k).url for k in KEYS]


def test_the_hash_is_the_same_in_every_process() -> None:
    # blake2b, not Python's salted hash(): every gateway pod agrees on the ring.
    # blake2b-64 of b"abc": a fixed number, whatever PYTHONHASHSEED is.
    assert key_hash(b"abc") == 0xD8BB14D833D59559
    assert key_hash(b"abc") != key_hash(b"abd")
    assert 0 <= key_hash(b"") < 2**64


def test_keys_spread_evenly_over_members() -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(4)]
    counts = {m.url: 0 for m in members}
    for url in owners(ring_of(members)):
        counts[url] += 1
    mean = len(KEYS) / 4
    assert max(counts.values()) / mean < 1.2
    assert min(counts.values()) / mean > 0.8


@pytest.mark.parametrize("count", [3, 4, 8])
def test_a_joining_member_takes_only_its_share(count: int) -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(count)]
    before = owners(ring_of(members))
    joined = Member("http://10.0.0.99:8000")
    after = owners(ring_of([*members, joined]))
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    # Every moved key moved to the new member, and about 1/(n+1) of them moved.
    assert all(a == joined.url for _, a in moved)
    share = len(moved) / len(KEYS)
    assert 0.5 / (count + 1) < share < 1.5 / (count + 1)


def test_a_leaving_member_gives_up_only_its_own_keys() -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(4)]
    before = owners(ring_of(members))
    after = owners(ring_of(members[:2] + members[3:]))
    moved = [b for b, a in zip(before, after, strict=True) if b != a]
    assert set(moved) == {members[2].url}
    assert len(moved) == before.count(members[2].url)


def test_walk_visits_every_member_once() -> None:
    members = [Member(f"m{i}") for i in range(5)]
    ring = ring_of(members)
    for key in KEYS[:50]:
        walked = list(ring.walk(key))
        assert sorted(m.url for m in walked) == sorted(m.url for m in members)
    assert list(ring_of([]).walk(1)) == []


def test_load_bound_is_ceiling_of_factor_times_mean_after_adding_one() -> None:
    assert load_bound(0, 4, 1.25) == 1
    assert load_bound(7, 4, 1.25) == 3  # ceil(1.25 * 8 / 4) = 3 (2.5 -> 3)
    assert load_bound(15, 4, 1.0) == 4


def test_a_key_stays_home_while_under_the_bound_and_spills_when_over() -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(4)]
    ring = ring_of(members)
    key = KEYS[0]
    home = ring.owner(key)
    placed = bounded_affinity(ring, key, tried=set(), cap=None, load_factor=1.25)
    assert placed == (home, False)
    # Home at 3, others at 1: total 6, bound ceil(1.25 * 7 / 4) = 3: home is full.
    for m in members:
        m.in_flight = 3 if m is home else 1
    placed = bounded_affinity(ring, key, tried=set(), cap=None, load_factor=1.25)
    assert placed is not None
    assert placed[0] is not home and placed[1] is True
    # The next one clockwise, not just any.
    assert placed[0] is [m for m in ring.walk(key)][1]


def test_a_hot_key_never_pushes_a_member_past_the_bound() -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(4)]
    ring = ring_of(members)
    for _ in range(200):  # 200 requests of one key, all in flight at once
        placed = bounded_affinity(ring, KEYS[1], tried=set(), cap=None, load_factor=1.25)
        assert placed is not None
        total = sum(m.in_flight for m in members)
        assert placed[0].in_flight < load_bound(total, 4, 1.25)
        placed[0].in_flight += 1
    loads = [m.in_flight for m in members]
    assert max(loads) <= 1.25 * (sum(loads) / 4) + 1


def test_ejected_draining_tried_and_full_members_are_skipped() -> None:
    members = [Member(f"http://10.0.0.{i}:8000") for i in range(3)]
    ring = ring_of(members)
    order = list(ring.walk(KEYS[2]))
    order[0].out = True
    placed = bounded_affinity(ring, KEYS[2], tried=set(), cap=None, load_factor=1.25)
    assert placed == (order[1], False)  # the home of a key whose owner is out
    order[1].draining = True
    placed = bounded_affinity(ring, KEYS[2], tried=set(), cap=None, load_factor=1.25)
    assert placed == (order[2], False)
    assert bounded_affinity(ring, KEYS[2], tried={order[2]}, cap=None, load_factor=1.25) is None
    order[2].in_flight = 2
    assert bounded_affinity(ring, KEYS[2], tried=set(), cap=2, load_factor=1.25) is None
    order[0].out = order[1].draining = False
    order[0].in_flight = 5
    # Over the bound but the only one not tried: taken anyway (spilled).
    placed = bounded_affinity(ring, KEYS[2], tried={order[1], order[2]}, cap=None, load_factor=1.25)
    assert placed == (order[0], True)


def test_least_in_flight_picks_the_emptiest_and_rotates_ties() -> None:
    members = [Member(f"m{i}") for i in range(3)]
    assert least_in_flight(members, start=0, tried=set(), cap=None) == 0
    assert least_in_flight(members, start=1, tried=set(), cap=None) == 1
    members[1].in_flight = 0
    members[0].in_flight = 2
    members[2].in_flight = 1
    assert least_in_flight(members, start=0, tried=set(), cap=None) == 1
    assert least_in_flight(members, start=0, tried={members[1]}, cap=None) == 2
    assert least_in_flight(members, start=0, tried={members[1]}, cap=1) is None
