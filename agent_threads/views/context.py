"""Context views: the part of a thread that fits a model's context window, kept up to date.

A view holds the thread's first `keep_first` messages as written, then the newest
messages that fit the budget. A tool call and its results are kept or dropped together,
and a view never begins (after the kept-first messages) with a tool result whose call it
lacks. The results of a message's calls follow it at once, and a call the thread holds no
result for (a process stopped between the call and its result) gets what the
`unanswered_tool_calls` policy says: a synthetic "interrupted" result by default (see
`views.answers`). A summary appended by `condense` stands for its range, at the range's
position; the summarized messages stay in the thread, only views leave them out.

Each thread handle keeps a `ViewCache`: the condensed sequence of its messages and a
watermark (the ranges it has read). Bringing a view up to date after appends costs
O(new messages) plus O(log n) to place the window, not O(history). The cache rebuilds
from scratch only when the thread's ranges stop extending the ones it read (a load, a
fork, a rollback) or when `thread.invalidate_view()` is called. A handle loaded with
`lazy=True` instead builds each view backward from its newest message (`_view_tail`),
reading the kept-first messages and the tail and skipping summarized ranges unread. The
rules themselves are written out in `views.condensed` (and `views.window`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from agent_threads.core import pieces
from agent_threads.core.pieces import Ranges
from agent_threads.errors import InvalidValueError
from agent_threads.messages import (
    DataPart,
    Message,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agent_threads.views.answers import UnansweredToolCalls, check_policy
from agent_threads.views.condensed import Condensed, NeedsRebuild
from agent_threads.views.tail import tail_select
from agent_threads.views.window import Limits, Prefix, Selection, select

if TYPE_CHECKING:
    import tiktoken


# -- token counting -----------------------------------------------------------------------


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens one message takes in a model's context.

    A view memoizes counts per counter (equal counters share them), so `count` must
    return the same number for the same message. Message `usage` figures are what a
    model call cost, not the size of the message, and are not used.
    """

    def count(self, message: Message) -> int:
        """The number of tokens `message` takes, its per-message overhead included."""
        ...


def _text_of(part: object) -> str:
    if isinstance(part, TextPart | ThinkingPart | SummaryPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return part.name + json.dumps(part.arguments, separators=(",", ":"), ensure_ascii=False)
    if isinstance(part, ToolResultPart):
        if isinstance(part.result, str):
            return part.result
        return json.dumps(part.result, separators=(",", ":"), ensure_ascii=False)
    return ""


def _pieces(message: Message) -> tuple[list[str], int]:
    """The texts a model reads for `message`, and how many data parts (images, files) it has."""
    texts: list[str] = [message.role]
    if message.author:
        texts.append(message.author)
    texts.extend(_text_of(part) for part in message.contents)
    return texts, sum(isinstance(part, DataPart) for part in message.contents)


@dataclass(frozen=True, slots=True)
class ApproximateTokenCounter:
    """A fast estimate needing no tokenizer: UTF-8 bytes / `bytes_per_token`, plus overheads.

    About four bytes a token matches English text in the common BPE vocabularies; text in
    other scripts takes more bytes per character, so it is not badly underestimated. Each
    data part (an image, a file) counts `per_data` tokens.
    """

    bytes_per_token: float = 4.0
    per_message: int = 4
    per_data: int = 256

    def count(self, message: Message) -> int:
        """The estimated tokens of `message`."""
        texts, data = _pieces(message)
        size = sum(len(text.encode()) for text in texts)
        return self.per_message + math.ceil(size / self.bytes_per_token) + data * self.per_data


class TiktokenCounter:
    """Exact counts with a tiktoken encoding (needs the `tiktoken` extra).

    Args:
        encoding: an encoding name such as "o200k_base" (tiktoken downloads it once and
            caches it) or a `tiktoken.Encoding` already built.
        per_message: tokens a chat format adds around each message.
        per_data: tokens counted for each data part (an image, a file).
    """

    def __init__(
        self,
        encoding: str | tiktoken.Encoding = "o200k_base",
        *,
        per_message: int = 3,
        per_data: int = 256,
    ) -> None:
        try:
            import tiktoken
        except ImportError as exc:  # pragma: no cover - tiktoken is in the dev extra
            raise ImportError(
                "TiktokenCounter needs: pip install 'agent-threads-framework[tiktoken]'"
            ) from exc
        self.encoding = tiktoken.get_encoding(encoding) if isinstance(encoding, str) else encoding
        self.per_message = per_message
        self.per_data = per_data

    def count(self, message: Message) -> int:
        """The tokens of `message` under this encoding, overheads included."""
        texts, data = _pieces(message)
        tokens = sum(len(self.encoding.encode_ordinary(text)) for text in texts)
        return self.per_message + tokens + data * self.per_data

    def _key(self) -> tuple[str, int, int]:
        return (self.encoding.name, self.per_message, self.per_data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TiktokenCounter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding.name!r})"


DEFAULT_COUNTER = ApproximateTokenCounter()
"""The counter a view uses when none is given."""


# -- the view -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DroppedRange:
    """Thread messages `start..end` (indexes and ids, both inclusive) that a view left out.

    Summaries standing for messages in the range are left out with them. The ids can be
    passed straight to `thread.condense(start_id, end_id, summary)`.
    """

    start: int
    end: int
    start_id: str
    end_id: str

    def __len__(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True, slots=True)
class ContextView:
    """The messages a model should see, their token count, and what was left out.

    Iterating a view (or `len(view)`) goes over its messages. Pass it to
    `agent_threads.formats.openai.to_messages` or `.anthropic.to_messages`.
    """

    messages: tuple[Message, ...]
    tokens: int
    dropped: tuple[DroppedRange, ...] = ()

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


def _limits(max_tokens: int | None, max_messages: int | None, keep_first: int) -> Limits:
    for name, value in (("max_tokens", max_tokens), ("max_messages", max_messages)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise InvalidValueError(f"view {name}={value!r}", reason="must be an int or None")
        if value is not None and value < 0:
            raise InvalidValueError(f"view {name}={value!r}", reason="must be >= 0")
    if not isinstance(keep_first, int) or isinstance(keep_first, bool) or keep_first < 0:
        raise InvalidValueError(f"view keep_first={keep_first!r}", reason="must be an int >= 0")
    return Limits(max_tokens=max_tokens, max_messages=max_messages, keep_first=keep_first)


def _counter(counter: TokenCounter | None) -> TokenCounter:
    if counter is None:
        return DEFAULT_COUNTER
    if not isinstance(counter, TokenCounter):
        raise InvalidValueError(
            f"view counter={counter!r}", reason="must have a count(message) -> int method"
        )
    return counter


def _wrap(selection: Selection) -> ContextView:
    dropped = tuple(DroppedRange(*d) for d in selection.dropped)
    return ContextView(messages=selection.messages, tokens=selection.tokens, dropped=dropped)


def build_view(
    messages: Iterable[Message],
    *,
    max_tokens: int | None = None,
    max_messages: int | None = None,
    keep_first: int = 0,
    counter: TokenCounter | None = None,
    unanswered_tool_calls: UnansweredToolCalls = "interrupt",
) -> ContextView:
    """A view of a plain list of messages, built from scratch in O(n log n).

    Follows the same rules as `ChatMessageThread.view` (which keeps its view cached).

    Raises:
        ContextOverflowError: the kept-first messages and the newest group do not fit.
        UnansweredToolCallError: policy "error" and the view would hold a call without
            its result.
        ValueError: a limit is negative, two messages share an id, or the policy is unknown.
    """
    limits = _limits(max_tokens, max_messages, keep_first)
    mode = check_policy(unanswered_tool_calls)
    condensed = Condensed.build(list(messages))
    prefix = Prefix(limits.keep_first)
    prefix.advance(condensed.raw)
    return _wrap(select(condensed, prefix, limits, _counter(counter), mode=mode, thread_id=None))


# -- the cache a thread keeps ----------------------------------------------------------------


class ViewSource(Protocol):
    """What a view cache reads from its thread (ChatMessageThread provides it)."""

    @property
    def id(self) -> str: ...

    @property
    def ranges(self) -> Ranges: ...

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]: ...

    async def on_new_messages(
        self, messages: Iterable[Message], *, deadline: float | None = None
    ) -> object: ...

    @property
    def head(self) -> int: ...

    @property
    def is_lazy(self) -> bool: ...

    async def index_of(self, message_id: str) -> int: ...


_MEMO_LIMIT = 100_000
"""Token counts a lazy handle's cache remembers by message id before starting over."""


class ViewCache:
    """The condensed sequence of one thread handle's messages and the ranges it has read."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._condensed: Condensed | None = None
        self._ranges: Ranges = ()
        self._prefixes: dict[int, Prefix] = {}
        self._memo: dict[tuple[Hashable, str], int] = {}
        self.rebuilds = 0
        """How many times the cache was built from scratch (for tests and benchmarks)."""

    def invalidate(self) -> None:
        """Forget everything: the next view is built from the thread's messages."""
        self._condensed = None
        self._ranges = ()
        self._prefixes = {}

    async def view(
        self,
        thread: ViewSource,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        keep_first: int = 0,
        counter: TokenCounter | None = None,
        unanswered_tool_calls: UnansweredToolCalls = "interrupt",
    ) -> ContextView:
        """The thread's view under these limits (see `ChatMessageThread.view`)."""
        limits = _limits(max_tokens, max_messages, keep_first)
        chosen = _counter(counter)
        mode = check_policy(unanswered_tool_calls)
        async with self._lock:
            if self._condensed is None and thread.is_lazy:
                selection = await self._tail(thread, limits, chosen, mode)
                if selection is not None:
                    return _wrap(selection)
            condensed = await self._update(thread)
            prefix = self._prefixes.get(limits.keep_first)
            if prefix is None:
                prefix = self._prefixes[limits.keep_first] = Prefix(limits.keep_first)
            prefix.advance(condensed.raw)
            return _wrap(select(condensed, prefix, limits, chosen, mode=mode, thread_id=thread.id))

    async def _tail(
        self,
        thread: ViewSource,
        limits: Limits,
        counter: TokenCounter,
        mode: UnansweredToolCalls,
    ) -> Selection | None:
        """A lazy handle's view, read from the newest message back (None: read it all)."""
        if len(self._memo) > _MEMO_LIMIT:
            self._memo = {}
        return await tail_select(
            thread, limits, counter, self._memo, mode=mode, thread_id=thread.id
        )

    async def condense(
        self,
        thread: ViewSource,
        start_id: str,
        end_id: str,
        summary_text: str,
        *,
        role: Role = "assistant",
        author: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Append a summary of `start_id..end_id` (see `ChatMessageThread.condense`)."""
        async with self._lock:
            condensed = await self._update(thread)
            start, end = condensed.condensable(start_id, end_id, thread_id=thread.id)
            fields: dict[str, Any] = {"role": role, "author": author}
            if metadata is not None:
                fields["metadata"] = metadata
            summary = Message.summary(
                summary_text, start_id=condensed.ids[start], end_id=condensed.ids[end], **fields
            )
        await thread.on_new_messages([summary])
        return summary

    async def _update(self, thread: ViewSource) -> Condensed:
        """Fold in the messages appended since the watermark, or rebuild if the ranges moved."""
        ranges = thread.ranges
        known = pieces.length(self._ranges)
        condensed = self._condensed
        if condensed is None or pieces.common_prefix(self._ranges, ranges) < known:
            condensed = self._rebuild(await thread.get_messages(0, pieces.length(ranges)))
        else:
            new = await thread.get_messages(known, pieces.length(ranges))
            condensed = self._fold(condensed, new)
        self._condensed, self._ranges = condensed, ranges
        return condensed

    def _rebuild(self, messages: Sequence[Message]) -> Condensed:
        self.rebuilds += 1
        self._prefixes = {}
        return Condensed.build(messages)

    def _fold(self, condensed: Condensed, new: Sequence[Message]) -> Condensed:
        for i, message in enumerate(new):
            try:
                condensed.append(message)
            except NeedsRebuild:  # a hand-made summary made older messages reappear
                self.rebuilds += 1
                return Condensed.build([*condensed.raw, *new[i + 1 :]])
        return condensed


__all__ = [
    "DEFAULT_COUNTER",
    "ApproximateTokenCounter",
    "ContextView",
    "DroppedRange",
    "TiktokenCounter",
    "TokenCounter",
    "ViewCache",
    "ViewSource",
    "build_view",
]
