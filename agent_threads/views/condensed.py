"""The condensed sequence behind context views: what a view may show, in order, and why.

The definitions every view follows (the incremental code below keeps them, and
`tests/test_views.py` checks it against a naive reading of the same words):

- **Visibility: later summaries win.** Walking from the newest message back, a message is
  hidden when its index lies in the range of a *visible* summary that comes after it; a
  summary is also hidden when the start of its range is. A visible summary stands for its
  range and sits at the range's start; every other visible message sits at its own index.
  The visible *entries* are ordered by (position, index).
- **Tool groups.** Walking the entries in order, each tool result is linked to the latest
  earlier entry holding a call with its `call_id`. An entry with a result that links nowhere
  is an *orphan*: left out of every view (a provider would reject it). Linked entries form a
  group; a view starts its newest part only at a cut that no group crosses.
- **Kept-first messages** are the thread's first `keep_first` messages as written, extended
  until every tool call among them has its result (orphan results among them are left out).
  The entries that a view may add after them are those standing for something past them.

Appending a message costs O(1); appending a summary costs O(entries from its range on). A
summary appended by hand whose range would make older messages reappear (it hides a summary
that reached further) is the one case that rebuilds from the messages (`NeedsRebuild`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence
from typing import Protocol, cast

from agent_threads.errors import MessageNotFoundError
from agent_threads.messages import Message, SummaryPart, ToolCallPart, ToolResultPart

_MAX_COUNTERS = 4
"""Token counts are memoized for this many counters at a time."""


class Counter(Protocol):
    """What the condensed sequence needs of a token counter (see views.TokenCounter)."""

    def count(self, message: Message) -> int: ...


def counter_key(counter: Counter) -> Hashable:
    """Equal counters share memoized counts; unhashable ones are told apart by identity."""
    try:
        hash(counter)
    except TypeError:
        return ("id", id(counter))
    return cast(Hashable, counter)  # hash() above proved it hashable


class NeedsRebuild(Exception):
    """A hand-made summary would make older messages reappear: rebuild from the messages."""


class Entry:
    """A visible message (or a summary standing for its range) and its place in the order."""

    __slots__ = (
        "calls",
        "end_id",
        "index",
        "last",
        "message",
        "pos",
        "raw",
        "reach",
        "results",
        "start_id",
        "tokens",
    )

    def __init__(
        self, message: Message, *, raw: int, pos: int, last: int, start_id: str, end_id: str
    ):
        self.message = message
        self.raw = raw
        self.pos = pos
        self.last = last
        self.start_id = start_id
        self.end_id = end_id
        self.calls = tuple(p.call_id for p in message.contents if isinstance(p, ToolCallPart))
        self.results = tuple(p.call_id for p in message.contents if isinstance(p, ToolResultPart))
        self.index = -1
        self.reach = -1
        self.tokens: dict[Hashable, int] = {}

    @property
    def is_summary(self) -> bool:
        return self.pos != self.raw or self.last != self.raw

    def count(self, key: Hashable, counter: Counter) -> int:
        tokens = self.tokens.get(key)
        if tokens is None:
            tokens = self.tokens[key] = checked_count(counter, self.message)
        return tokens


def checked_count(counter: Counter, message: Message) -> int:
    """The counter's token count for `message`, checked to be a non-negative int."""
    tokens = counter.count(message)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise TypeError(
            f"token counter {counter!r} returned {tokens!r} for message {message.id!r};"
            " a count must be a non-negative int"
        )
    return tokens


def summary_span(message: Message, raw: int, index: dict[str, int]) -> tuple[int, int] | None:
    """The `(start, end)` indexes a summary message stands for, or None if it stands for none.

    A summary counts only if both ids name earlier messages, start first.
    """
    for part in message.contents:
        if isinstance(part, SummaryPart):
            start, end = index.get(part.start_id), index.get(part.end_id)
            if start is None or end is None or not start <= end < raw:
                return None
            return start, end
    return None


class Intervals:
    """Disjoint, merged closed intervals of message indexes (the hidden ones)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def containing(self, value: int) -> int | None:
        """The start of the interval holding `value`, or None."""
        i = bisect_right(self._starts, value) - 1
        return self._starts[i] if i >= 0 and value <= self._ends[i] else None

    def add(self, start: int, end: int) -> None:
        lo = bisect_left(self._ends, start - 1)
        hi = bisect_right(self._starts, end + 1)
        if lo < hi:
            start, end = min(start, self._starts[lo]), max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]


_Eaten = list[tuple[int, int, "_Eaten"]]


class _Blocks:
    """Entry indexes a view may not start at: merged `(reach, index]` intervals, with undo.

    Intervals are added for ever larger `index`, so merging is a stack; each merged
    interval remembers what it swallowed, so `forget_from` can undo a suffix of additions.
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._eaten: list[_Eaten] = []

    def add(self, reach: int, index: int) -> None:
        eaten: _Eaten = []
        start = reach
        while self._ends and self._ends[-1] >= start:
            s, e = self._starts.pop(), self._ends.pop()
            eaten.append((s, e, self._eaten.pop()))
            start = min(start, s)
        self._starts.append(start)
        self._ends.append(index)
        self._eaten.append(eaten)

    def forget_from(self, index: int) -> None:
        """Undo every interval added for entries at `index` or later."""
        while self._ends and self._ends[-1] >= index:
            self._starts.pop()
            self._ends.pop()
            for s, e, inner in reversed(self._eaten.pop()):
                self._starts.append(s)
                self._ends.append(e)
                self._eaten.append(inner)

    def containing(self, index: int) -> tuple[int, int] | None:
        """The `(reach, end)` interval holding `index` (a cut before it is invalid), or None."""
        i = bisect_left(self._starts, index) - 1
        if i >= 0 and index <= self._ends[i]:
            return self._starts[i], self._ends[i]
        return None


class Condensed:
    """The visible entries of a list of messages, with tool groups, kept up to date on append."""

    def __init__(self) -> None:
        self.raw: list[Message] = []
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.entries: list[Entry] = []
        self.positions: list[int] = []
        self.orphans: list[Entry] = []
        self._orphan_positions: list[int] = []
        self.summaries: dict[int, Entry] = {}
        self.blocks = _Blocks()
        self._calls: dict[str, list[Entry]] = {}
        self._cumulative: dict[Hashable, list[int]] = {}
        self._counters: dict[Hashable, Counter] = {}

    # -- building -------------------------------------------------------------------

    @classmethod
    def build(cls, messages: Sequence[Message]) -> Condensed:
        """The condensed sequence of `messages`, computed from scratch (O(n log n)).

        Raises:
            ValueError: two messages share an id.
        """
        condensed = cls()
        condensed.raw = list(messages)
        condensed.ids = [m.id for m in condensed.raw]
        condensed.index = {message_id: i for i, message_id in enumerate(condensed.ids)}
        if len(condensed.index) != len(condensed.ids):
            raise ValueError("message ids must be unique within a thread")
        for entry in condensed._visible():
            condensed._link(entry)
        return condensed

    def _visible(self) -> list[Entry]:
        hidden = Intervals()
        found: list[Entry] = []
        i = len(self.raw) - 1
        while i >= 0:
            covered_from = hidden.containing(i)
            if covered_from is not None:
                i = covered_from - 1
                continue
            span = summary_span(self.raw[i], i, self.index)
            if span is None:
                found.append(self._entry(i, i, i))
            elif hidden.containing(span[0]) is None:
                hidden.add(*span)
                found.append(self._entry(i, *span))
            i -= 1
        found.sort(key=lambda e: (e.pos, e.raw))
        return found

    def _entry(self, raw: int, pos: int, last: int) -> Entry:
        ids = self.ids
        return Entry(
            self.raw[raw], raw=raw, pos=pos, last=last, start_id=ids[pos], end_id=ids[last]
        )

    def append(self, message: Message) -> None:
        """Take one more message (the newest).

        Raises:
            NeedsRebuild: a summary would make older messages reappear.
            ValueError: its id is already taken.
        """
        raw = len(self.raw)
        if message.id in self.index:
            raise ValueError(f"message id {message.id!r} is already in the thread")
        self.raw.append(message)
        self.ids.append(message.id)
        self.index[message.id] = raw
        span = summary_span(message, raw, self.index)
        if span is None:
            self._link(self._entry(raw, raw, raw))
            return
        start, end = span
        covered = self._covered(start, end)
        later = self._truncate(start)
        for entry in covered:
            self.summaries.pop(entry.raw, None)
        self._link(self._entry(raw, start, end))
        for entry in later:
            if entry.pos > end:
                self._link(entry)

    def _covered(self, start: int, end: int) -> list[Entry]:
        """The entries a new summary of `start..end` hides; NeedsRebuild if others reappear."""
        if any(e.pos < start <= e.raw <= end for e in self.summaries.values()):
            raise NeedsRebuild
        lo, hi = bisect_left(self.positions, start), bisect_right(self.positions, end)
        olo = bisect_left(self._orphan_positions, start)
        ohi = bisect_right(self._orphan_positions, end)
        covered = self.entries[lo:hi] + self.orphans[olo:ohi]
        if any(e.last > end for e in covered):
            raise NeedsRebuild
        return covered

    def _truncate(self, position: int) -> list[Entry]:
        """Remove the entries at `position` or later; return them in order."""
        i = bisect_left(self.positions, position)
        removed = self.entries[i:]
        for entry in reversed(removed):
            for call_id in reversed(entry.calls):
                stack = self._calls[call_id]
                stack.pop()
                if not stack:
                    del self._calls[call_id]
        self.blocks.forget_from(i)
        del self.entries[i:]
        del self.positions[i:]
        for cumulative in self._cumulative.values():
            del cumulative[i + 1 :]
        oi = bisect_left(self._orphan_positions, position)
        removed += self.orphans[oi:]
        del self.orphans[oi:]
        del self._orphan_positions[oi:]
        removed.sort(key=lambda e: (e.pos, e.raw))
        return removed

    def _link(self, entry: Entry) -> None:
        """Add `entry` after every other one, linking its tool results to their calls."""
        reach = len(self.entries)
        for call_id in entry.results:
            stack = self._calls.get(call_id)
            if not stack:
                entry.index = entry.reach = -1
                self.orphans.append(entry)
                self._orphan_positions.append(entry.pos)
                self._remember_summary(entry)
                return
            reach = min(reach, stack[-1].reach)
        entry.index, entry.reach = len(self.entries), reach
        self.entries.append(entry)
        self.positions.append(entry.pos)
        for call_id in entry.calls:
            self._calls.setdefault(call_id, []).append(entry)
        if reach < entry.index:
            self.blocks.add(reach, entry.index)
        self._remember_summary(entry)

    def _remember_summary(self, entry: Entry) -> None:
        if entry.is_summary:
            self.summaries[entry.raw] = entry

    # -- token counts -----------------------------------------------------------------

    def cumulative(self, counter: Counter) -> tuple[Hashable, list[int]]:
        """The counter's key and the running token totals of the entries (`[0, t0, t0+t1, ...]`)."""
        key = counter_key(counter)
        cumulative = self._cumulative.get(key)
        if cumulative is None:
            if len(self._cumulative) >= _MAX_COUNTERS:
                oldest = next(iter(self._cumulative))
                del self._cumulative[oldest], self._counters[oldest]
            cumulative = self._cumulative[key] = [0]
            self._counters[key] = counter  # keeps an id-keyed counter alive
        total = cumulative[-1]
        for entry in self.entries[len(cumulative) - 1 :]:
            total += entry.count(key, counter)
            cumulative.append(total)
        return key, cumulative

    # -- condensation -----------------------------------------------------------------

    def condensable(self, start_id: str, end_id: str, *, thread_id: str) -> tuple[int, int]:
        """The indexes a summary of `start_id..end_id` should name, after checking it is sound.

        Each end snaps outwards to the entry shown for it (a summary, when the message is
        already summarized). The range must hold whole entries and cut no tool group.

        Raises:
            MessageNotFoundError: an id is not in the thread.
            ValueError: the range is reversed, overlaps a summary only in part, or would
                separate a tool call from its result.
        """
        first = self._entry_for(start_id, thread_id=thread_id)
        last = self._entry_for(end_id, thread_id=thread_id)
        start, end = first.pos, last.last
        if start > end:
            raise ValueError(
                f"cannot condense {start_id!r}..{end_id!r} in thread {thread_id!r}:"
                " the start comes after the end"
            )
        self._check_whole_entries(start, end, thread_id)
        for cut in (start, end + 1):
            self._check_cut(cut, thread_id)
        return start, end

    def _entry_for(self, message_id: str, *, thread_id: str) -> Entry:
        raw = self.index.get(message_id)
        if raw is None:
            raise MessageNotFoundError(message_id, thread_id=thread_id)
        if raw in self.summaries:
            return self.summaries[raw]
        for entries, positions in (
            (self.entries, self.positions),
            (self.orphans, self._orphan_positions),
        ):
            i = bisect_right(positions, raw) - 1
            if i >= 0 and entries[i].pos <= raw <= entries[i].last:
                return entries[i]
        raise ValueError(
            f"message {message_id!r} of thread {thread_id!r} is no longer shown by any view"
            " (a later summary replaced the summary holding it); condense around that summary"
        )

    def _check_whole_entries(self, start: int, end: int, thread_id: str) -> None:
        for entry in self.summaries.values():
            inside = start <= entry.pos <= end
            if inside != (start <= entry.last <= end) or (not inside and start <= entry.raw <= end):
                raise ValueError(
                    f"cannot condense indexes {start}..{end} of thread {thread_id!r}: it"
                    f" overlaps only part of summary {entry.message.id!r}"
                    f" (indexes {entry.pos}..{entry.last}, itself at {entry.raw})"
                )

    def _check_cut(self, position: int, thread_id: str) -> None:
        i = bisect_left(self.positions, position)
        block = None if i in (0, len(self.entries)) else self.blocks.containing(i)
        if block is None:
            return
        for entry in self.entries[i : block[1] + 1]:
            if entry.reach < i:
                raise ValueError(
                    f"cannot condense up to index {position - 1} of thread {thread_id!r}:"
                    f" it would separate tool call(s) {list(entry.results)} from their"
                    f" result in message {entry.message.id!r}"
                )
