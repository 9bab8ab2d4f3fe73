"""The condensed sequence behind context views: what a view may show, in order, and why.

The definitions every view follows (the incremental code below keeps them, and
`tests/views/test_views.py` checks it against a naive reading of the same words):

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
  until every tool call among them has its result, if the thread holds one (orphan results
  among them are left out). The entries that a view may add after them are those standing
  for something past them.
- **Answers.** A call of an entry is *unanswered* when no later entry links to it. What a
  view shows for it (a synthetic result, nothing, or an error) is the policy of
  `views.answers`, which also places each result right after its call; the token and
  message counts of an entry are those of what the view shows for it.

Appending a message costs O(1); appending a summary costs O(entries from its range on). A
summary appended by hand whose range would make older messages reappear (it hides a summary
that reached further) is the one case that rebuilds from the messages (`NeedsRebuild`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Hashable, Sequence
from typing import Protocol, cast

from agent_threads.errors import MessageNotFoundError
from agent_threads.messages import Message, SummaryPart, ToolCallPart, ToolResultPart
from agent_threads.views.answers import Mode, presented

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


_NO_ANSWERS: dict[str, int] = {}
"""The answers of every entry holding no call (never written: only calls are answered)."""


class NeedsRebuild(Exception):
    """A hand-made summary would make older messages reappear: rebuild from the messages."""


class Entry:
    """A visible message (or a summary standing for its range) and its place in the order."""

    __slots__ = (
        "answered",
        "answers",
        "calls",
        "end_id",
        "in_place",
        "index",
        "irregular",
        "last",
        "links",
        "message",
        "pos",
        "raw",
        "reach",
        "results",
        "split",
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
        self.links: tuple[Entry, ...] = ()
        """The entry each of its results answers (set when linked)."""
        self.answered: dict[str, int] = {} if self.calls else _NO_ANSWERS
        """How many linked results answer each of its calls."""
        self.answers = 0
        """How many entries link to it."""
        self.split = False
        """Its results answer several entries, or stand beside other parts: a view splits it."""
        self.in_place = True
        """It is not a result, or only answers already follow its call up to it."""
        self.irregular = False
        """A view must rearrange it: split, out of place, or with unanswered calls."""

    @property
    def is_summary(self) -> bool:
        return self.pos != self.raw or self.last != self.raw

    def count(self, key: Hashable, counter: Counter) -> int:
        tokens = self.tokens.get(key)
        if tokens is None:
            tokens = self.tokens[key] = checked_count(counter, self.message)
        return tokens

    def unanswered(self) -> tuple[str, ...]:
        """Its calls no linked result answers."""
        return tuple([c for c in self.calls if not self.answered.get(c)])

    def has_unanswered(self) -> bool:
        """Whether a call of it has no linked result."""
        return not all(map(self.answered.get, self.calls))

    def _form(self, mode: Mode) -> tuple[bool, tuple[str, ...]] | None:
        """How a view shows it: None as written, else `(split, unanswered calls)`."""
        if not self.irregular:  # most entries: no call left unanswered, nothing to split
            return None
        unanswered = () if mode in ("error", "keep") else self.unanswered()
        return None if not self.split and not unanswered else (self.split, unanswered)

    def weight(self, key: Hashable, counter: Counter, mode: Mode) -> int:
        """The tokens of what a view shows for it under `mode`."""
        form = self._form(mode)
        if form is None:
            return self.count(key, counter)
        memo = (key, mode, form)
        tokens = self.tokens.get(memo)
        if tokens is None:
            shown = presented(self.message, split=form[0], unanswered=form[1], mode=mode)
            tokens = self.tokens[memo] = sum(
                self.count(key, counter) if m is self.message else checked_count(counter, m)
                for m in shown
            )
        return tokens

    def size(self, mode: Mode) -> int:
        """How many messages a view shows for it under `mode`."""
        form = self._form(mode)
        if form is None:
            return 1
        return len(presented(self.message, split=form[0], unanswered=form[1], mode=mode))


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
        self.irregular: list[int] = []
        """Indexes of the entries a view must rearrange (see `Entry.irregular`), sorted."""
        self._calls: dict[str, list[Entry]] = {}
        self._cumulative: dict[tuple[Hashable, Mode], list[int]] = {}
        self._counters: dict[tuple[Hashable, Mode], Counter] = {}
        self._sizes: dict[Mode, list[int]] = {}

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
        unanswered: list[Entry] = []
        for entry in reversed(removed):
            for call_id in reversed(entry.calls):
                stack = self._calls[call_id]
                stack.pop()
                if not stack:
                    del self._calls[call_id]
            self._unlink_results(entry, unanswered)
            entry.answered, entry.answers = {} if entry.calls else _NO_ANSWERS, 0
        self.blocks.forget_from(i)
        del self.irregular[bisect_left(self.irregular, i) :]
        del self.entries[i:]
        del self.positions[i:]
        self._recount_from(i)
        for target in unanswered:
            if target.index < i:
                self._reclassify(target)
                self._recount_from(target.index)
        oi = bisect_left(self._orphan_positions, position)
        removed += self.orphans[oi:]
        del self.orphans[oi:]
        del self._orphan_positions[oi:]
        removed.sort(key=lambda e: (e.pos, e.raw))
        return removed

    def _link(self, entry: Entry) -> None:
        """Add `entry` after every other one, linking its tool results to their calls."""
        reach = len(self.entries)
        targets: list[Entry] = []
        for call_id in entry.results:
            stack = self._calls.get(call_id)
            if not stack:
                entry.index = entry.reach = -1
                self.orphans.append(entry)
                self._orphan_positions.append(entry.pos)
                self._remember_summary(entry)
                return
            targets.append(stack[-1])
            reach = min(reach, stack[-1].reach)
        entry.index, entry.reach = len(self.entries), reach
        self.entries.append(entry)
        self.positions.append(entry.pos)
        for call_id in entry.calls:
            self._calls.setdefault(call_id, []).append(entry)
        if reach < entry.index:
            self.blocks.add(reach, entry.index)
        self._link_results(entry, targets)
        self._remember_summary(entry)

    # -- answers ----------------------------------------------------------------------

    def _link_results(self, entry: Entry, targets: list[Entry]) -> None:
        """Note which calls `entry`'s results answer, and whether a view must move it."""
        if targets:
            self._answer(entry, targets)
        elif entry.calls:  # it asks and nothing answers it yet: the newest irregular entry
            entry.irregular = True
            self.irregular.append(entry.index)

    def _answer(self, entry: Entry, targets: list[Entry]) -> None:
        if len(targets) == 1:  # one result, as nearly always: the same, unrolled
            target = targets[0]
            entry.links = (target,)
            entry.split = len(entry.message.contents) > 1
            entry.in_place = entry.index == target.index + 1 + target.answers
            target.answers += 1
            if _add(target, entry.results[0], 1):
                self._reclassify(target)
                self._recount_from(target.index)
            if entry.split or not entry.in_place:
                self._reclassify(entry)
            return
        entry.links = tuple(targets)
        distinct = list(dict.fromkeys(targets))
        first = distinct[0]
        entry.split = len(targets) < len(entry.message.contents) or len(distinct) > 1
        entry.in_place = entry.index == first.index + 1 + first.answers
        for target in distinct:
            target.answers += 1
        for call_id, target in zip(entry.results, targets, strict=True):
            if _add(target, call_id, 1):  # answered now: shown as written again, maybe
                self._reclassify(target)
                self._recount_from(target.index)
        if entry.split or not entry.in_place:
            self._reclassify(entry)

    def _unlink_results(self, entry: Entry, unanswered: list[Entry]) -> None:
        """Undo `_link_results` for `entry`; collect the entries left with an unanswered call."""
        for target in dict.fromkeys(entry.links):
            target.answers -= 1
        for call_id, target in zip(entry.results, entry.links, strict=True):
            if _add(target, call_id, -1):
                unanswered.append(target)
        entry.links, entry.split, entry.in_place, entry.irregular = (), False, True, False

    def _reclassify(self, entry: Entry) -> None:
        """Keep `irregular` (the entries a view must rearrange) up to date for `entry`."""
        irregular = entry.split or not entry.in_place or entry.has_unanswered()
        if irregular != entry.irregular:
            entry.irregular = irregular
            if irregular:
                insort(self.irregular, entry.index)
            else:
                del self.irregular[bisect_left(self.irregular, entry.index)]

    def _recount_from(self, index: int) -> None:
        """Forget running totals past entry `index` (its weight changed, or it is gone)."""
        for totals in self._cumulative.values():
            del totals[index + 1 :]
        for totals in self._sizes.values():
            del totals[index + 1 :]

    def is_regular_from(self, index: int) -> bool:
        """Whether a view shows entries `index..` as they are (nothing to move or answer)."""
        return bisect_left(self.irregular, index) == len(self.irregular)

    def _remember_summary(self, entry: Entry) -> None:
        if entry.is_summary:
            self.summaries[entry.raw] = entry

    # -- token counts -----------------------------------------------------------------

    def cumulative(self, counter: Counter, mode: Mode) -> tuple[Hashable, list[int]]:
        """The counter's key and the running token totals of the entries (`[0, t0, t0+t1, ...]`).

        Each entry counts what a view shows for it under `mode` (a synthetic result too).
        """
        key = counter_key(counter)
        slot = (key, mode)
        cumulative = self._cumulative.get(slot)
        if cumulative is None:
            if len(self._cumulative) >= _MAX_COUNTERS:
                oldest = next(iter(self._cumulative))
                del self._cumulative[oldest], self._counters[oldest]
            cumulative = self._cumulative[slot] = [0]
            self._counters[slot] = counter  # keeps an id-keyed counter alive
        total = cumulative[-1]
        for entry in self.entries[len(cumulative) - 1 :]:
            total += entry.weight(key, counter, mode)
            cumulative.append(total)
        return key, cumulative

    def sizes(self, mode: Mode) -> list[int]:
        """The running totals of the messages a view shows for the entries under `mode`."""
        sizes = self._sizes.setdefault(mode, [0])
        total = sizes[-1]
        for entry in self.entries[len(sizes) - 1 :]:
            total += entry.size(mode)
            sizes.append(total)
        return sizes

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


def _add(entry: Entry, call_id: str, step: int) -> bool:
    """Add `step` to the results answering `call_id` of `entry`; True if it is (un)answered now."""
    before = entry.answered.get(call_id, 0)
    entry.answered[call_id] = before + step
    return (before == 0) != (before + step == 0)
