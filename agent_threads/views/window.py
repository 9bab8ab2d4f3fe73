"""The window of a view: the kept-first messages, then the newest entries that fit.

Works on the condensed sequence of `_condensed` (whose docstring states the rules); costs
O(log n) plus the size of the result. The messages chosen are then put in the shape a
provider takes (`views.answers.arrange`), which is skipped when nothing in them needs it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from agent_threads.errors import ContextOverflowError
from agent_threads.messages import Message, ToolCallPart, ToolResultPart
from agent_threads.views.answers import Mode, arrange
from agent_threads.views.condensed import Condensed, Counter, Entry, checked_count


class Prefix:
    """The kept-first messages for one `keep_first`, extended as the thread grows."""

    def __init__(self, keep_first: int) -> None:
        self.keep_first = keep_first
        self.end = 0
        self.messages: list[Message] = []
        self.orphans: list[int] = []
        self._pending: set[str] = set()
        self._latest: dict[str, int] = {}  # call_id -> the kept message holding it last
        self._answers: dict[int, int] = {}  # kept message -> messages answering it
        self._moved = False  # a kept result is split or not right after its call
        self._ahead: dict[str, int] = {}  # call_id -> latest result seen from `end` on
        self._scanned = 0
        self._tokens: dict[Hashable, tuple[int, int]] = {}
        self._shown: dict[tuple[Hashable, Mode], tuple[int, int, int]] = {}
        self._counts: dict[tuple[Hashable, str, int, tuple[str, ...]], int] = {}

    @property
    def is_open(self) -> bool:
        """Whether it may still grow: short of `keep_first`, or a kept call has no result."""
        return self.end < self.keep_first or bool(self._pending)

    @property
    def is_regular(self) -> bool:
        """Whether a view shows the kept messages as they are (see `views.answers`)."""
        return not self._moved and not self._pending

    def wants_more(self, raw: Sequence[Message]) -> bool:
        """Whether `raw[end]` joins: the prefix is short, or `raw` answers a kept call later."""
        return self.end < self.keep_first or (bool(self._pending) and self._answered_ahead(raw))

    def _answered_ahead(self, raw: Sequence[Message]) -> bool:
        """Whether `raw` holds a result for a pending call at `end` or later (reads ahead once)."""
        self._scanned = max(self._scanned, self.end)
        while not any(self._ahead.get(c, -1) >= self.end for c in self._pending):
            if self._scanned >= len(raw):
                return False
            for part in raw[self._scanned].contents:
                if isinstance(part, ToolResultPart):
                    self._ahead[part.call_id] = self._scanned
            self._scanned += 1
        return True

    def advance(self, raw: Sequence[Message]) -> None:
        """Take in messages while short of `keep_first` or while `raw` answers a kept call."""
        while self.end < len(raw) and self.wants_more(raw):
            message = raw[self.end]
            results = [p.call_id for p in message.contents if isinstance(p, ToolResultPart)]
            if all(call_id in self._latest for call_id in results):
                self._keep(message, results)
            else:
                self.orphans.append(self.end)
            self.end += 1
        if not self.is_open:
            self._ahead = {}  # complete for good: nothing more to look ahead for

    def _keep(self, message: Message, results: list[str]) -> None:
        kept = len(self.messages)
        if results:
            targets = list(dict.fromkeys(self._latest[c] for c in results))
            before = self._answers.get(targets[0], 0)
            if (
                len(targets) > 1
                or len(results) < len(message.contents)
                or kept != targets[0] + 1 + before
            ):
                self._moved = True
            for target in targets:
                self._answers[target] = self._answers.get(target, 0) + 1
        self.messages.append(message)
        self._pending.difference_update(results)
        calls = [p.call_id for p in message.contents if isinstance(p, ToolCallPart)]
        self._latest.update(dict.fromkeys(calls, kept))
        self._pending.update(calls)

    def tokens(self, key: Hashable, counter: Counter, mode: Mode) -> int:
        """The tokens of what a view shows for the kept messages under `mode`."""
        if not self.is_regular:
            return self._shown_form(key, counter, mode)[0]
        counted, total = self._tokens.get(key, (0, 0))
        for message in self.messages[counted:]:
            total += checked_count(counter, message)
        self._tokens[key] = (len(self.messages), total)
        return total

    def size(self, key: Hashable, counter: Counter, mode: Mode) -> int:
        """How many messages a view shows for the kept messages under `mode`."""
        return len(self.messages) if self.is_regular else self._shown_form(key, counter, mode)[1]

    def _shown_form(self, key: Hashable, counter: Counter, mode: Mode) -> tuple[int, int]:
        """Tokens and size of the kept messages once arranged (recomputed when they grow)."""
        shown = self._shown.get((key, mode))
        if shown is None or shown[0] != len(self.messages):
            arranged = arrange(self.messages, "keep" if mode == "error" else mode)
            tokens = sum(self._count(key, counter, m) for m in arranged)
            shown = self._shown[(key, mode)] = (len(self.messages), tokens, len(arranged))
        return shown[1], shown[2]

    def _count(self, key: Hashable, counter: Counter, message: Message) -> int:
        calls = tuple(p.call_id for p in message.contents if isinstance(p, ToolCallPart))
        memo = (key, message.id, len(message.contents), calls)
        tokens = self._counts.get(memo)
        if tokens is None:
            tokens = self._counts[memo] = checked_count(counter, message)
        return tokens


@dataclass(frozen=True, slots=True)
class Limits:
    """What a view must fit in."""

    max_tokens: int | None
    max_messages: int | None
    keep_first: int


@dataclass(frozen=True, slots=True)
class Selection:
    """A view, before it is wrapped for the caller."""

    messages: tuple[Message, ...]
    tokens: int
    dropped: list[tuple[int, int, str, str]]


class _Measure:
    """One additive measure (tokens, or messages) of the entries after the kept-first ones.

    Running totals over `entries`, and the values of the `head` entries.
    """

    def __init__(self, cum: list[int], head: list[int], split: int) -> None:
        self.cum = cum
        self.head = head
        self.split = split

    def suffix(self, j: int) -> int:
        """The measure of the tail's entries from `j` on."""
        h = len(self.head)
        if j >= h:
            return self.cum[-1] - self.cum[self.split + j - h]
        return sum(self.head[j:]) + self.cum[-1] - self.cum[self.split]

    def first_within(self, budget: int) -> int:
        """The smallest j whose suffix is within `budget` (>= 0)."""
        i = bisect_left(self.cum, self.cum[-1] - budget, lo=self.split)
        if i > self.split:
            return len(self.head) + i - self.split
        return next(k for k in range(len(self.head) + 1) if self.suffix(k) <= budget)


class _Tail:
    """The entries a view may show after the kept-first messages, indexed `0 .. size`.

    They are `head` (summaries placed among the kept-first messages but reaching past
    them; usually none) followed by `entries[split:]`. Their tokens and message counts are
    those of what the view shows for them under `mode` (see `Entry.weight`).
    """

    def __init__(
        self,
        condensed: Condensed,
        kept_end: int,
        counter: Counter,
        mode: Mode,
    ) -> None:
        self.c = condensed
        self.counter = counter
        self.mode = mode
        self.split = bisect_left(condensed.positions, kept_end)
        self.head = [e for e in condensed.entries[: self.split] if e.last >= kept_end]
        self.size = len(self.head) + len(condensed.entries) - self.split
        self.key, cum = condensed.cumulative(counter, mode)
        weights = [e.weight(self.key, counter, mode) for e in self.head] if self.head else []
        self.tokens = _Measure(cum, weights, self.split)
        self._sizes: _Measure | None = None

    @property
    def sizes(self) -> _Measure:
        """Message counts (computed on first use: only a message budget needs them)."""
        if self._sizes is None:
            sizes = [e.size(self.mode) for e in self.head]
            self._sizes = _Measure(self.c.sizes(self.mode), sizes, self.split)
        return self._sizes

    def entry(self, j: int) -> Entry:
        h = len(self.head)
        return self.head[j] if j < h else self.c.entries[self.split + j - h]

    def messages_from(self, j: int) -> list[Message]:
        h = len(self.head)
        head = [e.message for e in self.head[j:]]
        return head + [e.message for e in self.c.entries[self.split + max(0, j - h) :]]

    def is_regular_from(self, j: int) -> bool:
        """Whether entries `j..` are shown as they are (no answer to place, split or add)."""
        if j < len(self.head):
            return False
        first = self.split + j - len(self.head)
        # from a cut past the first, next_valid saw to it that no tool group crosses it
        crosses = j == 0 and self.c.blocks.containing(first) is not None
        return not crosses and self.c.is_regular_from(first)

    def first_fitting(self, tokens: int | None, messages: int | None) -> int:
        """The smallest j whose suffix fits both budgets."""
        j = 0 if messages is None else self.sizes.first_within(messages)
        return j if tokens is None else max(j, self.tokens.first_within(tokens))

    def next_valid(self, j: int) -> int:
        """The smallest cut at or after j that no tool group crosses."""
        while 0 < j < self.size:
            block = self.c.blocks.containing(self.entry(j).index)
            if block is None:
                return j
            end = block[1]
            if end + 1 >= self.split:
                j = len(self.head) + end + 1 - self.split
            else:
                j = next((k for k, e in enumerate(self.head) if e.index > end), len(self.head))
        return j

    def previous_valid(self, j: int) -> int:
        """The largest cut at or before j that no tool group crosses."""
        while 0 < j < self.size:
            block = self.c.blocks.containing(self.entry(j).index)
            if block is None:
                return j
            start = block[0]
            if start >= self.split:
                j = len(self.head) + start - self.split
            else:
                j = max((k for k, e in enumerate(self.head) if e.index <= start), default=0)
        return j


def select(
    condensed: Condensed,
    prefix: Prefix,
    limits: Limits,
    counter: Counter,
    *,
    mode: Mode,
    thread_id: str | None,
) -> Selection:
    """The view: kept-first messages, then the newest entries that fit from a valid cut.

    Costs O(log n) plus the size of the result. Calls without results are treated by
    `mode` (see `views.answers`), whose synthetic results count against the budgets.

    Raises:
        ContextOverflowError: the kept-first messages and the newest group do not fit.
        UnansweredToolCallError: mode "error" and the view holds a call without result.
    """
    tail = _Tail(condensed, prefix.end, counter, mode)
    kept = prefix.tokens(tail.key, counter, mode)
    token_budget = None if limits.max_tokens is None else limits.max_tokens - kept
    message_budget = None
    if limits.max_messages is not None:
        message_budget = limits.max_messages - prefix.size(tail.key, counter, mode)
    start = tail.size + 1
    if (token_budget is None or token_budget >= 0) and (
        message_budget is None or message_budget >= 0
    ):
        start = tail.next_valid(tail.first_fitting(token_budget, message_budget))
    if start > tail.size or (start == tail.size and tail.size > 0):
        _overflow(tail, prefix, kept, limits, thread_id)
    if prefix.is_regular and tail.is_regular_from(start):
        shown = (*prefix.messages, *tail.messages_from(start))
    else:
        shown = tuple(
            arrange([*prefix.messages, *tail.messages_from(start)], mode, thread_id=thread_id)
        )
    return Selection(
        messages=shown,
        tokens=kept + tail.tokens.suffix(start),
        dropped=_dropped(tail, prefix, start),
    )


def _overflow(
    tail: _Tail, prefix: Prefix, kept_tokens: int, limits: Limits, thread_id: str | None
) -> None:
    group = tail.previous_valid(tail.size - 1) if tail.size else 0
    tokens = kept_tokens + tail.tokens.suffix(group)
    kept = prefix.size(tail.key, tail.counter, tail.mode)
    newest = tail.sizes.suffix(group)
    if limits.max_tokens is not None and tokens > limits.max_tokens:
        needed, limit, unit = tokens, limits.max_tokens, "tokens"
    else:
        assert limits.max_messages is not None
        needed, limit, unit = kept + newest, limits.max_messages, "messages"
    raise ContextOverflowError(
        thread_id, needed=needed, limit=limit, unit=unit, kept=kept, group=newest
    )


def _dropped(tail: _Tail, prefix: Prefix, start: int) -> list[tuple[int, int, str, str]]:
    ids = tail.c.ids
    dropped = [(i, i, ids[i], ids[i]) for i in prefix.orphans]
    gap_end = -1
    if start > 0:
        last = tail.entry(start - 1)
        gap_end = last.last
        dropped.append((prefix.end, gap_end, ids[prefix.end], last.end_id))
    for orphan in tail.c.orphans:
        if orphan.last >= prefix.end and orphan.pos > gap_end:
            first = max(orphan.pos, prefix.end)
            dropped.append((first, orphan.last, ids[first], orphan.end_id))
    dropped.sort()
    return dropped
