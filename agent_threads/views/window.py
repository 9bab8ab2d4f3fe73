"""The window of a view: the kept-first messages, then the newest entries that fit.

Works on the condensed sequence of `_condensed` (whose docstring states the rules); costs
O(log n) plus the size of the result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from agent_threads.errors import ContextOverflowError
from agent_threads.messages import Message, ToolCallPart, ToolResultPart
from agent_threads.views.condensed import Condensed, Counter, Entry, checked_count


class Prefix:
    """The kept-first messages for one `keep_first`, extended as the thread grows."""

    def __init__(self, keep_first: int) -> None:
        self.keep_first = keep_first
        self.end = 0
        self.messages: list[Message] = []
        self.orphans: list[int] = []
        self._pending: set[str] = set()
        self._calls: set[str] = set()
        self._tokens: dict[Hashable, tuple[int, int]] = {}

    def wants_more(self) -> bool:
        """Whether the next message would join (the prefix is short or a call awaits)."""
        return self.end < self.keep_first or bool(self._pending)

    def advance(self, raw: Sequence[Message]) -> None:
        """Take in messages while short of `keep_first` or while a call awaits its result."""
        while self.end < len(raw) and self.wants_more():
            message = raw[self.end]
            results = [p.call_id for p in message.contents if isinstance(p, ToolResultPart)]
            if all(call_id in self._calls for call_id in results):
                self.messages.append(message)
                self._pending.difference_update(results)
                calls = [p.call_id for p in message.contents if isinstance(p, ToolCallPart)]
                self._calls.update(calls)
                self._pending.update(calls)
            else:
                self.orphans.append(self.end)
            self.end += 1

    def tokens(self, key: Hashable, counter: Counter) -> int:
        counted, total = self._tokens.get(key, (0, 0))
        for message in self.messages[counted:]:
            total += checked_count(counter, message)
        self._tokens[key] = (len(self.messages), total)
        return total


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


class _Tail:
    """The entries a view may show after the kept-first messages, indexed `0 .. size`.

    They are `head` (summaries placed among the kept-first messages but reaching past
    them; usually none) followed by `entries[split:]`.
    """

    def __init__(self, condensed: Condensed, kept_end: int, key: Hashable, cum: list[int]):
        self.c = condensed
        self.split = bisect_left(condensed.positions, kept_end)
        self.head = [e for e in condensed.entries[: self.split] if e.last >= kept_end]
        self.key = key
        self.cum = cum
        self.size = len(self.head) + len(condensed.entries) - self.split

    def entry(self, j: int) -> Entry:
        h = len(self.head)
        return self.head[j] if j < h else self.c.entries[self.split + j - h]

    def messages_from(self, j: int) -> list[Message]:
        h = len(self.head)
        head = [e.message for e in self.head[j:]]
        return head + [e.message for e in self.c.entries[self.split + max(0, j - h) :]]

    def tokens_from(self, j: int) -> int:
        h = len(self.head)
        if j >= h:
            return self.cum[-1] - self.cum[self.split + j - h]
        head = sum(e.tokens[self.key] for e in self.head[j:])
        return head + self.cum[-1] - self.cum[self.split]

    def first_fitting(self, tokens: int | None, messages: int | None) -> int:
        """The smallest j whose suffix fits both budgets (`size + 1` if none does)."""
        j = 0 if messages is None else max(0, self.size - messages)
        if tokens is not None:
            i = bisect_left(self.cum, self.cum[-1] - tokens, lo=self.split)
            if i > self.split:
                j = max(j, len(self.head) + i - self.split)
            else:
                j = max(
                    j, next(k for k in range(len(self.head) + 1) if self.tokens_from(k) <= tokens)
                )
        return j

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
    thread_id: str | None,
) -> Selection:
    """The view: kept-first messages, then the newest entries that fit from a valid cut.

    Costs O(log n) plus the size of the result.

    Raises:
        ContextOverflowError: the kept-first messages and the newest group do not fit.
    """
    key, cum = condensed.cumulative(counter)
    prefix_tokens = prefix.tokens(key, counter)
    tail = _Tail(condensed, prefix.end, key, cum)
    token_budget = None if limits.max_tokens is None else limits.max_tokens - prefix_tokens
    message_budget = (
        None if limits.max_messages is None else limits.max_messages - len(prefix.messages)
    )
    start = tail.size + 1
    if (token_budget is None or token_budget >= 0) and (
        message_budget is None or message_budget >= 0
    ):
        start = tail.next_valid(tail.first_fitting(token_budget, message_budget))
    if start > tail.size or (start == tail.size and tail.size > 0):
        _overflow(tail, prefix, prefix_tokens, limits, thread_id)
    shown = tail.messages_from(start)
    return Selection(
        messages=(*prefix.messages, *shown),
        tokens=prefix_tokens + tail.tokens_from(start),
        dropped=_dropped(tail, prefix, start),
    )


def _overflow(
    tail: _Tail, prefix: Prefix, prefix_tokens: int, limits: Limits, thread_id: str | None
) -> None:
    group = tail.previous_valid(tail.size - 1) if tail.size else 0
    kept = len(prefix.messages)
    tokens = prefix_tokens + tail.tokens_from(group)
    messages = kept + tail.size - group
    if limits.max_tokens is not None and tokens > limits.max_tokens:
        needed, limit, unit = tokens, limits.max_tokens, "tokens"
    else:
        assert limits.max_messages is not None
        needed, limit, unit = messages, limits.max_messages, "messages"
    raise ContextOverflowError(
        thread_id, needed=needed, limit=limit, unit=unit, kept=kept, group=tail.size - group
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
