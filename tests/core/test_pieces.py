from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_threads.core import pieces
from agent_threads.core.pieces import OpenSegment, Range


def materialize(ranges: tuple[Range, ...]) -> list[tuple[str, int]]:
    return [(r.segment_id, p) for r in ranges for p in range(r.start, r.end)]


range_lists = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 20), st.integers(0, 5)).map(
        lambda t: Range(t[0], t[1], t[1] + t[2])
    ),
    max_size=6,
).map(tuple)


@given(ranges=range_lists, data=st.data())
def test_prefix_and_slices_match_the_materialized_list(
    ranges: tuple[Range, ...], data: st.DataObject
) -> None:
    flat = materialize(ranges)
    start = data.draw(st.integers(0, len(flat)))
    end = data.draw(st.integers(start, len(flat)))
    assert materialize(pieces.slice_ranges(ranges, start, end)) == flat[start:end]
    assert materialize(pieces.prefix(ranges, start)) == flat[:start]
    assert pieces.length(ranges) == len(flat)


@given(ranges=range_lists, data=st.data())
def test_locate_and_index_of_are_inverse(ranges: tuple[Range, ...], data: st.DataObject) -> None:
    flat = materialize(ranges)
    if not flat:
        with pytest.raises(IndexError):
            pieces.locate(ranges, 0)
        return
    index = data.draw(st.integers(0, len(flat) - 1))
    place = pieces.locate(ranges, index)
    assert place == flat[index]
    assert pieces.index_of(ranges, *place) == flat.index(place)


def test_extend_merges_contiguous_rows_into_the_last_range() -> None:
    ranges = pieces.extend((), "s", 0, 3)
    assert pieces.extend(ranges, "s", 3, 2) == (Range("s", 0, 5),)
    assert pieces.extend(ranges, "t", 3, 2) == (Range("s", 0, 3), Range("t", 3, 5))


def test_extending_is_allowed_only_at_the_owned_segments_end() -> None:
    ranges = (Range("s", 0, 5),)
    assert pieces.can_extend(ranges, OpenSegment("s", 5))
    assert not pieces.can_extend(ranges, None)  # a fork owns nothing yet
    assert not pieces.can_extend(pieces.prefix(ranges, 3), OpenSegment("s", 5))  # after a rollback
    assert not pieces.can_extend(ranges, OpenSegment("t", 5))
    assert pieces.can_extend((), OpenSegment("s", 0))


def test_common_prefix_counts_shared_leading_messages() -> None:
    a = (Range("s", 0, 5), Range("t", 5, 7))
    assert pieces.common_prefix(a, (Range("s", 0, 9),)) == 5
    assert pieces.common_prefix(a, (Range("s", 0, 3),)) == 3
    assert pieces.common_prefix(a, a) == 7
    assert pieces.common_prefix(a, (Range("u", 0, 5),)) == 0


def test_consolidation_copies_the_newest_half_only_when_too_long() -> None:
    short = tuple(Range(f"s{i}", i, i + 1) for i in range(64))
    assert pieces.consolidation_start(short) is None
    long = (*short, Range("x", 64, 65))
    assert pieces.consolidation_start(long) == 32


def test_ranges_read_from_json_are_validated() -> None:
    assert Range.from_json(["s", 1, 2]) == Range("s", 1, 2)
    for bad in (["s", 2, 1], ["s", 1], [1, 2, 3], "s:1:2", ["s", True, 2]):
        with pytest.raises(ValueError):
            Range.from_json(bad)
