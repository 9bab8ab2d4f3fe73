"""The piece table: a thread's messages as ranges over immutable, append-only segments.

Pure functions and values, no I/O. A segment is an append-only run of messages stored
once; position `p` in a segment holds the message that was at index `p` of the thread
that wrote it. A thread's content is a short tuple of `Range`s whose concatenation is
its message list, so forking or checkpointing copies the ranges, never the messages.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_RANGES = 64
"""Past this many ranges a thread consolidates its newest ones into one segment."""


@dataclass(frozen=True, slots=True)
class Range:
    """Positions `start <= p < end` of segment `segment_id`."""

    segment_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"invalid range {self.segment_id}[{self.start}:{self.end}]")

    def __len__(self) -> int:
        return self.end - self.start

    def to_json(self) -> list[Any]:
        """The `[segment_id, start, end]` triple stores keep (see stores.base)."""
        return [self.segment_id, self.start, self.end]

    @classmethod
    def from_json(cls, value: Any) -> Range:
        """Read a `[segment_id, start, end]` triple; ValueError if it is not one."""
        if (
            not isinstance(value, list | tuple)
            or len(value) != 3
            or not isinstance(value[0], str)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
        ):
            raise ValueError(f"not a [segment_id, start, end] range: {value!r}")
        return cls(value[0], value[1], value[2])


@dataclass(frozen=True, slots=True)
class OpenSegment:
    """The segment a thread owns and may extend, and how far it has been written."""

    segment_id: str
    end: int


Ranges = tuple[Range, ...]


def length(ranges: Iterable[Range]) -> int:
    """The number of messages the ranges hold."""
    return sum([r.end - r.start for r in ranges])  # `len(r)`, without a call to it each


def _offsets(ranges: Sequence[Range]) -> list[int]:
    offsets, total = [], 0
    for r in ranges:
        offsets.append(total)
        total += len(r)
    return offsets


def locate(ranges: Sequence[Range], index: int) -> tuple[str, int]:
    """The `(segment_id, position)` of the message at `index` of the thread."""
    if index < 0:
        raise IndexError(f"message index {index} is negative")
    offsets = _offsets(ranges)
    i = bisect.bisect_right(offsets, index) - 1
    if i < 0 or index >= offsets[i] + len(ranges[i]):
        raise IndexError(f"message index {index} out of range (length {length(ranges)})")
    return ranges[i].segment_id, ranges[i].start + index - offsets[i]


def index_of(ranges: Sequence[Range], segment_id: str, position: int) -> int | None:
    """The thread index of segment position `(segment_id, position)`, or None if outside."""
    offset = 0
    for r in ranges:
        if r.segment_id == segment_id and r.start <= position < r.end:
            return offset + position - r.start
        offset += len(r)
    return None


def prefix(ranges: Sequence[Range], count: int) -> Ranges:
    """The ranges of the first `count` messages (for fork and rollback)."""
    return slice_ranges(ranges, 0, count)


def slice_ranges(ranges: Sequence[Range], start: int, end: int) -> Ranges:
    """The ranges holding thread indexes `start <= i < end` (clamped to the length)."""
    out: list[Range] = []
    offset = 0
    for r in ranges:
        lo, hi = max(start, offset), min(end, offset + len(r))
        if lo < hi:
            out.append(Range(r.segment_id, r.start + lo - offset, r.start + hi - offset))
        offset += len(r)
        if offset >= end:
            break
    return tuple(out)


def extend(ranges: Sequence[Range], segment_id: str, start: int, count: int) -> Ranges:
    """The ranges after writing `count` messages at `segment_id[start:]`.

    Merges into the last range when it ends exactly where the new rows begin.
    """
    if count == 0:
        return tuple(ranges)
    if ranges and ranges[-1].segment_id == segment_id and ranges[-1].end == start:
        last = ranges[-1]
        return (*ranges[:-1], Range(segment_id, last.start, start + count))
    return (*ranges, Range(segment_id, start, start + count))


def can_extend(ranges: Sequence[Range], open_segment: OpenSegment | None) -> bool:
    """Whether a thread may append into its open segment rather than open a new one.

    Only when it owns that segment and its content ends exactly where the segment's
    written rows end: after a fork (no open segment) or a rollback (the last range ends
    before the segment does), rows above would belong to someone else's history.
    """
    if open_segment is None:
        return False
    if not ranges:
        return open_segment.end == 0
    last = ranges[-1]
    return last.segment_id == open_segment.segment_id and last.end == open_segment.end


def common_prefix(a: Sequence[Range], b: Sequence[Range]) -> int:
    """How many leading messages `a` and `b` provably share (same segment positions)."""
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x.segment_id != y.segment_id or x.start != y.start:
            break
        shared += min(len(x), len(y))
        if x.end != y.end:
            break
    return shared


def consolidation_start(ranges: Sequence[Range], *, max_ranges: int = MAX_RANGES) -> int | None:
    """Where to start copying when the list grew too long, or None if it is short enough.

    Copying the newest half of the ranges into one segment halves their number; the cost
    is paid at most once per `max_ranges / 2` new ranges, so it is amortized.
    """
    if len(ranges) <= max_ranges:
        return None
    return length(ranges[: max_ranges // 2])
