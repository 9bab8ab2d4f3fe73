from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_threads._segment_cache import SegmentCache
from agent_threads.log import Range
from agent_threads.messages import Message

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
