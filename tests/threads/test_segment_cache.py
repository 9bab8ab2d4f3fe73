from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_threads.core.pieces import Range
from agent_threads.messages import Message
from agent_threads.threads.segment_cache import SegmentCache

MESSAGES = [Message.user(str(i)) for i in range(40)]
PUTS = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10)), max_size=8)


@given(puts=PUTS, start=st.integers(0, 40), length=st.integers(0, 20))
def test_has_and_missing_agree_with_the_positions_put(
    puts: list[tuple[int, int]], start: int, length: int
) -> None:
    cache, held = SegmentCache(), set[int]()
    for at, count in puts:
        cache.put("s", at, MESSAGES[at : at + count])
        held.update(range(at, min(40, at + count)))
    wanted = Range("s", start, start + length)
    absent = [p for p in range(wanted.start, wanted.end) if p not in held]
    assert cache.has([wanted]) == (not absent)
    gaps = cache.missing([wanted])
    assert [p for r in gaps for p in range(r.start, r.end)] == absent
    for p in held:
        assert cache.get("s", p) is MESSAGES[p]


def test_places_list_every_segment_position_of_a_message_once() -> None:
    cache = SegmentCache()
    cache.put("s", 0, MESSAGES[:3])
    cache.put("t", 5, MESSAGES[1:2])  # a copy, as consolidation makes
    cache.put("s", 1, MESSAGES[1:3])  # read again: nothing new
    cache.put("u", 0, MESSAGES[1:2])
    assert cache.places(MESSAGES[1].id) == [("s", 1), ("t", 5), ("u", 0)]
    assert cache.places(MESSAGES[0].id) == [("s", 0)]
    assert cache.places(MESSAGES[9].id) == []
    assert cache.holds_any(m.id for m in MESSAGES[8:]) is False
    assert cache.holds_any(m.id for m in MESSAGES[2:]) is True


def test_a_message_twice_in_one_put_keeps_both_places_in_order() -> None:
    cache = SegmentCache()
    cache.put("s", 0, [MESSAGES[0], MESSAGES[1], MESSAGES[0]])
    assert cache.places(MESSAGES[0].id) == [("s", 0), ("s", 2)]


@given(st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40))
def test_a_bounded_cache_holds_its_newest_runs_and_forgets_the_oldest(sizes: list[int]) -> None:
    cache = SegmentCache(limit=10)
    messages = [Message.user(str(i)) for i in range(sum(sizes))]
    start = 0
    for size in sizes:
        cache.put("s", start, messages[start : start + size])
        start += size
    last = sizes[-1]
    newest = [Range("s", start - last, start)]
    assert cache.has(newest)
    assert list(cache.iterate(newest)) == messages[start - last :]
    held = [m for m in messages if cache.places(m.id)]
    assert len(held) <= max(10, last)
    assert held == messages[len(messages) - len(held) :]  # a suffix: the newest ones
    for m in held:
        assert cache.get(*cache.places(m.id)[0]) is m


def at(segment_id: str, position: int) -> Message:
    """The message stored at a place: some repeat within and across segments, as copies do."""
    return MESSAGES[(position * (1 if segment_id == "s" else 3)) % 20]


PLACED_PUTS = st.lists(
    st.tuples(st.sampled_from("st"), st.integers(0, 30), st.integers(0, 10)), max_size=10
)


@given(puts=PLACED_PUTS, limit=st.none() | st.integers(1, 15), early=st.booleans())
def test_places_are_what_the_cache_holds_whenever_the_index_is_built(
    puts: list[tuple[str, int, int]], limit: int | None, early: bool
) -> None:
    cache = SegmentCache(limit=limit)
    if early:  # the index built before the puts is kept up to date by them
        assert cache.holds_any(m.id for m in MESSAGES) is False
    for segment_id, start, count in puts:
        cache.put(segment_id, start, [at(segment_id, p) for p in range(start, start + count)])
    held = [
        (s, p) for s in "st" for p in range(42) if cache.has([Range(s, p, p + 1)])
    ]  # built after the puts (when not early) from what is held
    for message in MESSAGES:
        assert cache.places(message.id) == [(s, p) for s, p in held if at(s, p) is message]
    assert cache.holds_any(m.id for m in MESSAGES) is bool(held)


def test_forgetting_a_run_read_twice_leaves_the_newer_messages_at_their_positions() -> None:
    cache = SegmentCache(limit=4)
    cache.put("s", 0, MESSAGES[0:4])
    cache.put("s", 0, MESSAGES[0:2])  # read again: a run below what is left once 0-4 go
    cache.put("s", 4, MESSAGES[4:6])
    cache.put("s", 6, MESSAGES[6:7])
    assert [cache.get("s", p) for p in range(4, 7)] == MESSAGES[4:7]
