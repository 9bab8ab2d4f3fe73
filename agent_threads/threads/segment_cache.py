"""The in-process copy of segment rows shared by a thread handle, its forks and copies."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import cast, overload

from agent_threads.core import pieces
from agent_threads.core.pieces import Range
from agent_threads.core.sequence import SequenceView
from agent_threads.messages import Message
from agent_threads.stores.base import MAX_POSITION

_POSITION_BITS = MAX_POSITION.bit_length()
_POSITION_MASK = (1 << _POSITION_BITS) - 1

_message_id = attrgetter("id")


class _Buffer:
    """Messages at consecutive positions `base, base+1, ...` of one segment.

    `holes` counts the positions not held yet (None), so that the usual question,
    whether a range is all held, costs O(1) rather than a scan when there are none.
    """

    __slots__ = ("base", "holes", "items")

    def __init__(self, base: int) -> None:
        self.base = base
        self.items: list[Message | None] = []
        self.holes = 0

    def put(self, start: int, messages: Sequence[Message]) -> None:
        if start < self.base:  # rare: rows below what we hold (a tail read came first)
            self.items[:0] = [None] * (self.base - start)
            self.holes += self.base - start
            self.base = start
        offset = start - self.base
        if offset > len(self.items):
            self.holes += offset - len(self.items)
            self.items.extend([None] * (offset - len(self.items)))
        overlap = min(len(messages), len(self.items) - offset)
        for i in range(overlap):  # rows never change once written; fill only the gaps
            if self.items[offset + i] is None:
                self.items[offset + i] = messages[i]
                self.holes -= 1
        self.items.extend(messages[overlap:] if overlap else messages)

    def drop(self, start: int, end: int) -> list[tuple[int, Message]]:
        """Forget positions `start <= p < end`; returns those held there, with positions.

        The positions left empty at either end are trimmed, so a buffer whose old
        messages are forgotten as new ones come stays as long as what it holds.
        """
        lo = max(start - self.base, 0)
        hi = max(min(end - self.base, len(self.items)), lo)  # a run below `base`: nothing
        dropped = [(self.base + i, m) for i, m in enumerate(self.items[lo:hi], lo) if m is not None]
        self.items[lo:hi] = [None] * (hi - lo)
        self.holes += len(dropped)
        lead = next((i for i, m in enumerate(self.items) if m is not None), len(self.items))
        del self.items[:lead]
        self.base += lead
        self.holes -= lead
        while self.items and self.items[-1] is None:
            self.items.pop()
            self.holes -= 1
        return dropped

    def runs(self) -> Iterator[tuple[int, list[Message]]]:
        """The runs of consecutive positions held: `(first position, messages)`."""
        if not self.holes:
            yield self.base, cast("list[Message]", self.items)
            return
        run: list[Message] = []
        for position, message in enumerate(self.items, self.base):
            if message is not None:
                run.append(message)
            elif run:
                yield position - len(run), run
                run = []
        if run:
            yield self.base + len(self.items) - len(run), run

    def get(self, position: int) -> Message | None:
        i = position - self.base
        return self.items[i] if 0 <= i < len(self.items) else None

    def has(self, start: int, end: int) -> bool:
        lo, hi = start - self.base, end - self.base
        if lo < 0 or hi > len(self.items):
            return False
        return self.holes == 0 or all(m is not None for m in self.items[lo:hi])

    def gaps(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """The runs `[lo, hi)` of positions in `[start, end)` not held yet."""
        if self.has(start, end):
            return
        run_start = None
        for position in range(start, end):
            if self.get(position) is None:
                run_start = position if run_start is None else run_start
            elif run_start is not None:
                yield run_start, position
                run_start = None
        if run_start is not None:
            yield run_start, end


def _add_place(places: dict[str, int | list[int]], message_id: str, place: int) -> None:
    held = places.setdefault(message_id, place)
    if isinstance(held, int):
        if held != place:
            places[message_id] = [held, place]
    elif place not in held:
        held.append(place)


def _drop_place(places: dict[str, int | list[int]], message_id: str, place: int) -> None:
    held = places.get(message_id)
    if held == place:
        del places[message_id]
    elif isinstance(held, list) and place in held:
        held.remove(place)
        if len(held) == 1:
            places[message_id] = held[0]


class SegmentCache:
    """Decoded messages by `(segment_id, position)`.

    Segment rows never change once written, so one cache can serve every handle whose
    ranges point into it, and a fork shares its parent's cache at no cost.

    With a `limit` (the cache of lazy handles) it holds about that many messages: once
    past it, the runs put longest ago are forgotten first, so a long-lived handle that
    keeps appending stays bounded in memory. Without one it keeps all it is given.
    """

    def __init__(self, *, limit: int | None = None) -> None:
        self.limit = limit
        self._held = 0
        self._runs: deque[tuple[str, int, int]] = deque()  # what was put, oldest first
        self._buffers: dict[str, _Buffer] = {}
        # message id -> its place, or a list of places when it has several (a copy made
        # by consolidation, a row read from two segments); a place is one int (see
        # `_place`): no tuple per message, and nothing the garbage collector follows.
        # None until a lookup needs it (see `_index`)
        self._places: dict[str, int | list[int]] | None = None
        self._segment_numbers: dict[str, int] = {}
        self._segment_ids: list[str] = []

    def _place(self, segment_id: str, position: int) -> int:
        """`(segment_id, position)` as one int: the segment's number, then the position."""
        number = self._segment_numbers.get(segment_id)
        if number is None:
            number = self._segment_numbers[segment_id] = len(self._segment_ids)
            self._segment_ids.append(segment_id)
        return number << _POSITION_BITS | position

    def _unpack(self, place: int) -> tuple[str, int]:
        return self._segment_ids[place >> _POSITION_BITS], place & _POSITION_MASK

    def put(self, segment_id: str, start: int, messages: Sequence[Message]) -> None:
        """Record that `messages` sit at `segment_id[start:]`."""
        buffer = self._buffers.get(segment_id)
        if buffer is None:
            buffer = self._buffers[segment_id] = _Buffer(start)
        buffer.put(start, messages)
        if self.limit is not None:
            self._runs.append((segment_id, start, start + len(messages)))
            self._held += len(messages)
        if self._places is not None:
            self._index_run(self._places, segment_id, start, messages)
        if self.limit is not None and self._held > self.limit:
            self._evict(self.limit)

    def _index(self) -> dict[str, int | list[int]]:
        """The message-id index, built from what is held on the first lookup, then kept.

        Not built before: an eager load holds every message of a thread, and the index
        (~80 bytes a message) would cost memory and load time to handles that never look
        an id up; a lazy handle looks ids up in the store, never here.
        """
        if self._places is None:
            places: dict[str, int | list[int]] = {}
            for segment_id, buffer in self._buffers.items():
                for start, run in buffer.runs():
                    self._index_run(places, segment_id, start, run)
            self._places = places
        return self._places

    def _index_run(
        self,
        places: dict[str, int | list[int]],
        segment_id: str,
        start: int,
        messages: Sequence[Message],
    ) -> None:
        if len(messages) == 1:  # an append of one message: no maps to build (0.7 us, not 2.6)
            _add_place(places, messages[0].id, self._place(segment_id, start))
            return
        ids = list(map(_message_id, messages))
        first = self._place(segment_id, start)
        fresh = dict(zip(ids, range(first, first + len(ids)), strict=True))
        if len(fresh) == len(ids) and places.keys().isdisjoint(fresh):
            places.update(fresh)  # the usual case: messages new to the index
        else:
            for place, message_id in enumerate(ids, first):
                _add_place(places, message_id, place)

    def _evict(self, limit: int) -> None:
        """Forget the oldest runs until about `limit` messages are held (never the newest)."""
        while self._held > limit and len(self._runs) > 1:
            segment_id, start, end = self._runs.popleft()
            self._held -= end - start
            buffer = self._buffers.get(segment_id)
            if buffer is None:
                continue
            dropped = buffer.drop(start, end)
            if self._places is not None:
                for position, message in dropped:
                    _drop_place(self._places, message.id, self._place(segment_id, position))
            if not buffer.items:
                del self._buffers[segment_id]

    def has(self, ranges: Sequence[Range]) -> bool:
        """Whether every message of `ranges` is cached."""
        for r in ranges:
            buffer = self._buffers.get(r.segment_id)
            if len(r) and (buffer is None or not buffer.has(r.start, r.end)):
                return False
        return True

    def missing(self, ranges: Sequence[Range]) -> list[Range]:
        """The ranges (or parts) whose messages are not cached yet."""
        found = []
        for r in ranges:
            buffer = self._buffers.get(r.segment_id)
            if buffer is None:
                found += [r] if len(r) else []
            else:
                found += [Range(r.segment_id, lo, hi) for lo, hi in buffer.gaps(r.start, r.end)]
        return found

    def get(self, segment_id: str, position: int) -> Message:
        """The cached message at a segment position (KeyError if not cached)."""
        buffer = self._buffers.get(segment_id)
        message = None if buffer is None else buffer.get(position)
        if message is None:
            raise KeyError((segment_id, position))
        return message

    def places(self, message_id: str) -> list[tuple[str, int]]:
        """Every cached `(segment_id, position)` holding this message id, sorted.

        The first lookup builds the index (O(messages held)); later ones cost O(1).
        """
        held = self._index().get(message_id)
        if held is None:
            return []
        if isinstance(held, int):
            return [self._unpack(held)]
        return sorted(map(self._unpack, held))

    def holds_any(self, message_ids: Iterable[str]) -> bool:
        """Whether any of these message ids is cached (in any segment); see `places`."""
        return not self._index().keys().isdisjoint(message_ids)

    def iterate(self, ranges: Sequence[Range]) -> Iterator[Message]:
        """The cached messages of `ranges`, in order."""
        for r in ranges:
            for position in range(r.start, r.end):
                yield self.get(r.segment_id, position)


class MessageList(SequenceView[Message]):
    """A read-only sequence of a thread's messages, built in O(1) over the cache.

    Compares equal to any sequence holding the same messages (a list, a tuple).
    """

    __slots__ = ("_cache", "_length", "_ranges")

    def __init__(self, cache: SegmentCache, ranges: Sequence[Range]) -> None:
        self._cache = cache
        self._ranges = tuple(ranges)
        self._length = pieces.length(ranges)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return list(self._cache.iterate(pieces.slice_ranges(self._ranges, start, stop)))
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"message index {index} out of range (length {self._length})")
        return self._cache.get(*pieces.locate(self._ranges, index))

    def __iter__(self) -> Iterator[Message]:
        return self._cache.iterate(self._ranges)

    def __repr__(self) -> str:
        return f"MessageList({list(self)!r})"
