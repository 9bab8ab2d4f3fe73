"""Views of lazily loaded threads, read backward from the newest message.

The rules in `_condensed` were chosen so that they can be evaluated from the end: a message
is hidden only by summaries after it, so walking back, the range of a visible summary is
skipped without being read. A lazy handle reads its kept-first messages, then pages of
messages from the newest back to where the budget runs out and every tool result it met
has found its call. It falls back to reading the whole thread (the forward fold) in the
rare cases this walk cannot settle alone: the view overflows, a tool result finds no
call before it, or one message holds results answering calls of several messages. Walking
back, a call's results have all been met by the time the call is: whether it is answered
(and so what the view shows for it) is known before it is weighed.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Hashable
from typing import Protocol

from agent_threads.errors import MessageNotFoundError
from agent_threads.messages import Message, SummaryPart
from agent_threads.views.answers import Mode, arrange
from agent_threads.views.condensed import Counter, Entry, Intervals, counter_key
from agent_threads.views.window import Limits, Prefix, Selection

PAGE = 64
"""Messages read from the store at a time, walking back."""


class TailSource(Protocol):
    """What the backward walk reads from a thread."""

    @property
    def head(self) -> int: ...

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]: ...

    async def index_of(self, message_id: str) -> int: ...


class _Pages:
    """Messages by index, read a page at a time (the thread's own cache keeps them)."""

    def __init__(self, thread: TailSource) -> None:
        self._thread = thread
        self._read: dict[int, Message] = {}
        self.rows = 0

    async def get(self, index: int) -> Message:
        message = self._read.get(index)
        if message is None:
            start = max(0, index - PAGE + 1)
            page = await self._thread.get_messages(start, index + 1)
            self._read.update(enumerate(page, start))
            self.rows += len(page)
            message = self._read[index]
        return message


async def _span(thread: TailSource, message: Message, raw: int) -> tuple[int, int] | None:
    for part in message.contents:
        if isinstance(part, SummaryPart):
            try:
                start = await thread.index_of(part.start_id)
                end = await thread.index_of(part.end_id)
            except MessageNotFoundError:
                return None
            return (start, end) if start <= end < raw else None
    return None


async def _entries_backward(thread: TailSource, pages: _Pages) -> AsyncIterator[Entry]:
    """The visible entries, newest first (reverse of their order), reading as little as can be."""
    hidden = Intervals()
    waiting: list[tuple[int, int, Entry]] = []  # summaries, by -(position, index)
    i = thread.head - 1
    while i >= 0:
        covered_from = hidden.containing(i)
        if covered_from is not None:
            i = covered_from - 1
            continue
        message = await pages.get(i)
        span = await _span(thread, message, i)
        while waiting and -waiting[0][0] > i:
            yield heapq.heappop(waiting)[2]
        if span is None:
            yield Entry(message, raw=i, pos=i, last=i, start_id=message.id, end_id=message.id)
        elif hidden.containing(span[0]) is None:
            hidden.add(*span)
            part = next(p for p in message.contents if isinstance(p, SummaryPart))
            entry = Entry(
                message,
                raw=i,
                pos=span[0],
                last=span[1],
                start_id=part.start_id,
                end_id=part.end_id,
            )
            heapq.heappush(waiting, (-span[0], -i, entry))
        i -= 1
    while waiting:
        yield heapq.heappop(waiting)[2]


async def tail_select(
    thread: TailSource,
    limits: Limits,
    counter: Counter,
    memo: dict[tuple[Hashable, str], int],
    *,
    mode: Mode,
    thread_id: str | None,
) -> Selection | None:
    """The view, read from the end; None when the whole thread must be read instead.

    Raises:
        UnansweredToolCallError: mode "error" and the view holds a call without result.
    """
    pages = _Pages(thread)
    prefix = await _prefix(thread, limits.keep_first)
    key = counter_key(counter)
    kept_tokens = prefix.tokens(key, counter, mode)
    kept_size = prefix.size(key, counter, mode)
    tokens = None if limits.max_tokens is None else limits.max_tokens - kept_tokens
    count = None if limits.max_messages is None else limits.max_messages - kept_size
    if (tokens is not None and tokens < 0) or (count is not None and count < 0):
        return None
    window: list[Entry] = []
    weights: list[int] = []
    used, shown, best = 0, 0, 0
    breaker: Entry | None = None  # the newest entry that did not fit
    results = _OpenResults()
    async for entry in _entries_backward(thread, pages):
        if not results.meet(entry):
            return None  # one message answers calls of several: read the whole thread
        if breaker is None and entry.last >= prefix.end:
            size, messages = _weight(entry, key, counter, memo, mode), entry.size(mode)
            if (tokens is not None and used + size > tokens) or (
                count is not None and shown + messages > count
            ):
                breaker = entry
            else:
                used, shown = used + size, shown + messages
                window.append(entry)
                weights.append(size)
                best = best if results.open else len(window)
        if breaker is not None and not results.open:
            below = window[best] if best < len(window) else breaker
            tokens_shown = kept_tokens + sum(weights[:best])
            return await _selection(
                pages, prefix, tokens_shown, window[:best], below, mode, thread_id
            )
    if breaker is None and not results.open and window:  # everything fits
        return await _selection(pages, prefix, kept_tokens + used, window, None, mode, thread_id)
    return None  # a result found no call, or nothing to show: read the whole thread


class _OpenResults:
    """The results met walking back whose calls are not met yet, linked as the forward fold does."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self._several: list[tuple[Entry, set[str]]] = []  # entries with more than one result

    def meet(self, entry: Entry) -> bool:
        """Link `entry`'s calls to the results met; False if one entry's results split up."""
        answered = self.open.intersection(entry.calls)
        if answered:
            for other, waiting in list(self._several):
                if waiting & answered:
                    if not waiting <= answered:
                        return False
                    self._several.remove((other, waiting))
            self.open -= answered
            entry.answered = dict.fromkeys(answered, 1)
        if entry.results:
            self.open.update(entry.results)
            entry.split = len(entry.results) < len(entry.message.contents)
            if len(set(entry.results)) > 1:
                self._several.append((entry, set(entry.results)))
        entry.irregular = entry.split or entry.has_unanswered()
        return True


async def _prefix(thread: TailSource, keep_first: int) -> Prefix:
    prefix = Prefix(keep_first)
    upto = min(thread.head, keep_first + 8)
    while True:
        prefix.advance(await thread.get_messages(0, upto))
        if not prefix.is_open or upto >= thread.head:
            return prefix
        upto = min(thread.head, upto * 2)


def _weight(
    entry: Entry, key: Hashable, counter: Counter, memo: dict[tuple[Hashable, str], int], mode: Mode
) -> int:
    remembered = memo.get((key, entry.message.id))
    if remembered is None:
        remembered = memo[(key, entry.message.id)] = entry.count(key, counter)
    entry.tokens[key] = remembered
    return entry.weight(key, counter, mode)


async def _selection(
    pages: _Pages,
    prefix: Prefix,
    tokens: int,
    shown: list[Entry],
    below: Entry | None,
    mode: Mode,
    thread_id: str | None,
) -> Selection | None:
    if not shown:
        return None  # not even the newest group fits: the forward path reports the overflow
    ids = {i: (await pages.get(i)).id for i in prefix.orphans}
    dropped = [(i, i, ids[i], ids[i]) for i in prefix.orphans]
    if below is not None:
        first_id = (await pages.get(prefix.end)).id
        dropped.append((prefix.end, below.last, first_id, below.end_id))
    messages = [*prefix.messages, *(e.message for e in reversed(shown))]
    return Selection(
        messages=tuple(arrange(messages, mode, thread_id=thread_id)),
        tokens=tokens,
        dropped=sorted(dropped),
    )
