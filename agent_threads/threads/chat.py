"""ChatMessageThread: a thread of messages stored as a piece table over segments."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import chain, repeat
from operator import attrgetter, contains
from typing import Any, NamedTuple, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    with_config,
)
from pydantic_core import PydanticSerializationError
from typing_extensions import TypedDict  # pydantic's own dependency: it reads only this one on 3.11

from agent_threads.core import limits, pieces
from agent_threads.core.ids import new_id
from agent_threads.core.pieces import OpenSegment, Range, Ranges
from agent_threads.core.records import (
    THREAD_KIND,
    RangeJson,
    ThreadData,
    ThreadStats,
    clean_metadata,
    given_usages,
    put_new,
    thread_exists,
    validation_problems,
)
from agent_threads.core.retry import Backoff
from agent_threads.errors import (
    ConflictError,
    DuplicateMessageError,
    InvalidValueError,
    MessageNotFoundError,
    NotLoadedError,
    StoreCorruptedError,
    ThreadNotFoundError,
)
from agent_threads.messages import (
    DataPart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    decode_arrays,
    unclaimed,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record, Row, RowArray, RowWrite, ThreadStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.segment_cache import MessageList, SegmentCache
from agent_threads.timetravel.checkpoint import Checkpoint, CheckpointReason
from agent_threads.timetravel.checkpoints import (
    append_to_log,
    clean_label,
    current_checkpoint,
    has_log,
    new_checkpoint,
    plan_log_write,
    save_checkpoint,
)
from agent_threads.timetravel.history import (
    LoadedHistory,
    load_history,
    plan_history,
    read_history,
    started_history,
    store_history,
)
from agent_threads.views.answers import UnansweredToolCalls
from agent_threads.views.context import ContextView, TokenCounter, ViewCache


@dataclass(frozen=True, slots=True)
class _Mark:
    """The checkpoint an append records with it: its label and why it is made."""

    label: str | None
    reason: CheckpointReason
    metadata: dict[str, JsonValue]


class _AppendPlan(NamedTuple):
    """Where an append writes its rows and what the thread looks like afterwards.

    A tuple: a frozen dataclass of these seven fields cost ~11,000 instructions to make
    (a `object.__setattr__` call a field), 2% of an append of one message.
    """

    segment_id: str
    start: int
    rows: list[Row]
    messages: list[Message]
    ranges: Ranges
    open_segment: OpenSegment
    head: int
    """The thread's length afterwards (`pieces.length(ranges)`)."""


@with_config(ConfigDict(extra="forbid"))
class _SegmentJson(TypedDict):
    """The segment a chat thread extends, as its record data holds it.

    A dict, not a model: an append makes one for its typed data, and a model of these
    two fields cost ~10,000 instructions to validate (2% of an append), a dict ~300.
    """

    id: str
    end: int


class ChatData(ThreadData):
    """A chat thread's record data: its piece table, head and the segment it extends."""

    ranges: tuple[RangeJson, ...] = ()
    head: int = 0
    segment: _SegmentJson | None = None
    auto_checkpoint: bool = False


def _content_data(
    ranges: Ranges, open_segment: OpenSegment | None, head: int | None = None
) -> dict[str, JsonValue]:
    """The record data that makes `ranges` the content, extending `open_segment` next.

    `head` is the ranges' length, if the caller knows it.
    """
    segment: JsonValue = (
        None if open_segment is None else {"id": open_segment.segment_id, "end": open_segment.end}
    )
    return {
        "ranges": [r.to_json() for r in ranges],
        "head": pieces.length(ranges) if head is None else head,
        "segment": segment,
    }


def _typed_content(plan: _AppendPlan) -> dict[str, object]:
    """`_content_data` of an append's plan, as `ChatData` reads it (`publish(typed=...)`)."""
    open_segment = plan.open_segment
    return {
        "ranges": tuple((r.segment_id, r.start, r.end) for r in plan.ranges),
        "head": plan.head,
        "segment": _SegmentJson(id=open_segment.segment_id, end=open_segment.end),
    }


_TO_JSON = Message.__pydantic_serializer__.to_json
"""`Message.model_dump_json` without its per-call wrapper (the same bytes, encoded)."""


_ID = attrgetter("id")
_METADATA = attrgetter("metadata")
_CONTENTS = attrgetter("contents")
_COST = attrgetter("cost")
_DATA = attrgetter("data")

_new_row = partial(tuple.__new__, Row)
"""`Row(message_id, data)` of a pair, made in C (`Row._make`, without its Python call)."""

_JUST_MESSAGES = frozenset({Message})
"""The types of a batch of plain messages (what `_only_messages` looks for)."""

_PLAIN_PARTS = frozenset({TextPart, ThinkingPart, DataPart, SummaryPart})
"""The parts that hold no free-form JSON for `_check_storable` to check."""

_MANY = 8
"""A batch this long is checked in C first (`_plainly_storable`, `_plain_rows`) and looked
at message by message only if that finds something to look at; a shorter batch costs
less looked at right away."""

_NUL = "\\u0000"
"""How compact JSON writes a NUL character."""


def _only_messages(messages: Iterable[object]) -> bool:
    """Whether every item is a `Message` itself (no subclass), in one pass in C."""
    return set(map(type, messages)) <= _JUST_MESSAGES


def _rows(messages: Sequence[Message]) -> list[Row]:
    """The messages as segment rows: id and compact JSON, exactly `model_dump_json()`."""
    if len(messages) == 1 and type(message := messages[0]) is Message:  # a chat's usual append
        return [_new_row((message.id, _TO_JSON(message).decode()))]
    ids = map(_ID, messages)
    if _only_messages(messages):  # a subclass serializes its own fields
        data: Iterator[str] = map(bytes.decode, map(_TO_JSON, messages))
    else:
        data = iter([m.model_dump_json() for m in messages])
    return list(map(_new_row, zip(ids, data, strict=True)))


def _new_rows(messages: Sequence[Message], thread_id: str) -> list[Row]:
    """`_rows` of messages about to be appended, checked to read back as they are.

    Raises:
        InvalidValueError: a message holds what would not (see `core.limits`).
    """
    many = len(messages) >= _MANY
    if not (many and _plainly_storable(messages)):
        for message in messages:
            _check_storable(message, thread_id)
    try:
        rows = _rows(messages)
    except PydanticSerializationError as exc:  # text UTF-8 cannot encode (a lone surrogate)
        raise _unwritable(messages, thread_id, exc) from exc
    if many and _plain_rows(list(map(_DATA, rows))):
        return rows  # the usual batch, told in C
    for row in rows:
        if _NUL in row.data:  # JSON escapes NUL so: look closer (a backslash text may too)
            limits.check_json(
                json.loads(row.data), f"thread {thread_id!r} message {row.message_id!r}"
            )
        if len(row.data) > limits.MAX_MESSAGE_BYTES // 4:
            size = len(row.data.encode())
            limits.check_message_size(size, f"thread {thread_id!r} message {row.message_id!r}")
    return rows


def _unwritable(
    messages: Sequence[Message], thread_id: str, error: PydanticSerializationError
) -> InvalidValueError:
    """The error naming the first message that cannot be written as JSON."""
    for message in messages:
        try:
            message.model_dump_json()
        except PydanticSerializationError as exc:
            return InvalidValueError(_where(message, thread_id), reason=f"not writable: {exc}")
    return InvalidValueError(f"thread {thread_id!r}", reason=f"not writable: {error}")


def _plain_rows(data: list[str]) -> bool:
    """Whether no row escapes a NUL or may be too large (found in C): none to look at."""
    limit = limits.MAX_MESSAGE_BYTES // 4  # in characters: 4 bytes each at most
    return not any(map(contains, data, repeat(_NUL))) and max(map(len, data)) <= limit


def _plainly_storable(messages: Sequence[Message]) -> bool:
    """Whether `_check_storable` has nothing to look at in any message (found in C).

    No metadata, no part holding free-form JSON (tool arguments or results), and every
    usage cost finite: the usual batch, whose messages need no look each.
    """
    return (
        not any(map(_METADATA, messages))
        and set(map(type, chain.from_iterable(map(_CONTENTS, messages)))) <= _PLAIN_PARTS
        and all(map(math.isfinite, map(_COST, given_usages(messages))))
    )


def _check_storable(message: Message, thread_id: str) -> None:
    """Check the free-form JSON of a message: its metadata, tool arguments and results."""
    if message.metadata:
        limits.check_json(message.metadata, f"{_where(message, thread_id)} metadata")
    for part in message.contents:
        if isinstance(part, ToolCallPart) and part.arguments:
            where = f"{_where(message, thread_id)} tool call {part.call_id!r} arguments"
            limits.check_json(part.arguments, where)
        elif isinstance(part, ToolResultPart):
            where = f"{_where(message, thread_id)} tool result {part.call_id!r}"
            limits.check_json(part.result, where)
    if message.usage is not None and not math.isfinite(message.usage.cost):
        where = f"{_where(message, thread_id)} usage.cost"
        raise InvalidValueError(where, reason="not a finite number")


def _where(message: Message, thread_id: str) -> str:
    """The message named in an error (made only when one is raised or checked for)."""
    return f"thread {thread_id!r} message {message.id!r}"


def _call_of(thread_id: str) -> str:
    """The call named in an error about its argument (made only when one is raised)."""
    return f"thread {thread_id!r} on_new_messages"


def _as_messages(messages: Iterable[Message], thread_id: str) -> list[Message]:
    if type(messages) is not list:  # (a list passes both checks below)
        where = _call_of(thread_id)
        if isinstance(messages, Message) or not isinstance(messages, Iterable):
            raise InvalidValueError(where, reason="takes a list of messages (wrap one in a list)")
        if isinstance(messages, str | bytes | Mapping):
            reason = f"takes a list of messages, not {messages!r:.60}"
            raise InvalidValueError(where, reason=reason)
    batch = list(messages)
    if len(batch) == 1 and type(batch[0]) is Message:
        return batch  # a chat's usual append: one message, told in two steps
    if _only_messages(batch) and len(set(map(_ID, batch))) == len(batch):
        return batch  # the usual batch; otherwise find the first culprit, in order
    seen: set[str] = set()
    for message in batch:
        if not isinstance(message, Message):
            raise InvalidValueError(
                _call_of(thread_id),
                reason=f"expected Message, got {type(message).__name__}: {message!r:.60}",
            )
        if message.id in seen:
            raise DuplicateMessageError(message.id, thread_id=thread_id)
        seen.add(message.id)
    return batch


LAZY_CACHE_LIMIT = 4096
"""About how many messages a lazy handle (and its forks) keeps in memory: the newest."""

READ_PAGE = 1024
"""Rows read from the store at a time: reading a long range holds at most this many
rows' text at once besides the messages decoded so far. Loads of 10,000 messages
measured ~1.5-2.5 ms faster (of ~45) with 1,024 than with 4,096 (likely as a smaller
page's text and objects stay in the CPU's caches); 512 was slower again."""


POP_LABEL = "before-pop"
"""The label of the checkpoint `pop()` saves of the old head: roll back to it to undo."""

CLEAR_LABEL = "before-clear"
"""The label of the checkpoint `clear()` saves of the old head."""


class _NothingToCut(Exception):
    """A pop or clear found the thread empty (raised out of a checkpoint's build)."""


def _without(stats: ThreadStats, removed: Iterable[Message]) -> ThreadStats:
    """`stats` less the removed messages' count and usage, never below zero.

    (A fork that reset its stats holds messages they never counted.)
    """
    less = ThreadStats().add(removed)
    return ThreadStats(
        message_count=max(0, stats.message_count - less.message_count),
        input_tokens=max(0, stats.input_tokens - less.input_tokens),
        output_tokens=max(0, stats.output_tokens - less.output_tokens),
        cost=max(0.0, stats.cost - less.cost),
    )


def _drained(items: list[RowArray]) -> Iterator[RowArray]:
    """`items` in order, each let go of as the next is taken (the list is emptied).

    So a decoded row array's text is not kept alive until its whole page is decoded:
    less memory at the peak of a long load, which comes at its last page.
    """
    items.reverse()
    while items:
        yield items.pop()


def _pages(ranges: Iterable[Range]) -> Iterator[Range]:
    """`ranges` cut into reads of at most `READ_PAGE` rows."""
    for r in ranges:
        for start in range(r.start, r.end, READ_PAGE):
            yield Range(r.segment_id, start, min(start + READ_PAGE, r.end))


class ChatMessageThread(AgentThread):
    """A conversation: an append-only list of messages that can be forked at any message.

    Forks share their parent's stored segments and in-memory messages, so a fork costs
    O(number of ranges), never O(messages).
    """

    type_name = "chat"
    data_schema = ChatData

    _ranges: Ranges
    _open_segment: OpenSegment | None
    _cache: SegmentCache
    _lazy: bool

    def _on_bind(self) -> None:
        data = self._data
        assert isinstance(data, ChatData)  # the data_schema
        self._ranges = tuple(Range(*r) for r in data.ranges)
        segment = data.segment
        self._open_segment = None if segment is None else OpenSegment(segment["id"], segment["end"])

    def _attach(
        self, cache: SegmentCache, *, lazy: bool, states: dict[str, ImmutableState] | None = None
    ) -> Self:
        """Give the handle its message cache and, unless lazy, a history without checkpoints.

        `states` is the state cache of the handle it comes from (shared, like `cache`).
        """
        self._cache = cache
        self._lazy = lazy
        self._history = None if lazy else started_history(self, states)
        return self

    def _shared_states(self) -> dict[str, ImmutableState] | None:
        return None if self._history is None else self._history.states

    # -- construction -------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        store: ThreadStore | None = None,
        *,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        auto_checkpoint: bool = False,
    ) -> Self:
        """Create and store a new, empty thread (in a new MemoryStore if none is given).

        `tags` map keys to values, e.g. `{"env": "prod", "reviewed": ""}`: a key is 1-64
        ASCII letters, digits, `_ - . : /`; a value a string of at most 256 characters
        without control characters (see `agent_threads.core.tags`). `AgentThread.find`
        lists the threads holding given tags.

        With `auto_checkpoint=True` every `on_new_messages` batch is followed by a
        checkpoint (reason `"auto"`), so every turn is a time-travel point; forks inherit it.

        Raises:
            ConflictError: the store already holds a thread with this id.
            InvalidIdError: `id` is not a valid id.
            InvalidValueError: the title, tags or metadata are not acceptable (tags: not a
                dict, e.g. a list of labels, the old form, or a key or value breaking the
                rules), naming the thread and the tag.
        """
        store = MemoryStore() if store is None else store
        extra = {**_content_data((), None), "auto_checkpoint": bool(auto_checkpoint)}
        record = cls.new_record(
            thread_id=id, title=title, tags=tags, metadata=metadata, extra=extra
        )
        stored = await put_new(store, record)
        return cls._bind(store, stored, ImmutableState())._attach(SegmentCache(), lazy=False)

    @classmethod
    async def load(
        cls,
        thread_id: str,
        *,
        store: ThreadStore,
        lazy: bool = False,
        cache_limit: int = LAZY_CACHE_LIMIT,
    ) -> Self:
        """Open a stored thread; with `lazy=True` read only its record, not its messages.

        A lazy handle keeps about `cache_limit` of the newest messages it read or appended
        in memory (the newest batch always).

        Raises:
            ThreadNotFoundError: no chat thread has this id.
            StoreCorruptedError: its record or rows cannot be decoded.
            InvalidValueError: `cache_limit` is not a positive number.
        """
        if isinstance(cache_limit, bool) or not isinstance(cache_limit, int) or cache_limit < 1:
            raise InvalidValueError(
                "cache_limit", reason=f"must be at least 1, got {cache_limit!r}"
            )
        record = await cls._read_record(store, thread_id)
        return await cls._open(store, record, lazy=lazy, cache_limit=cache_limit)

    @classmethod
    async def get_or_create(
        cls,
        id: str,
        *,
        store: ThreadStore,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        auto_checkpoint: bool = False,
        lazy: bool = False,
    ) -> Self:
        """The stored thread `id`, created (empty, with these fields) if there is none.

        Safe to race: when several tasks or processes call it at once, one creation wins
        (the store's create is a compare-and-set) and every caller gets that thread. The
        fields are used only to create it; an existing thread keeps its own. With
        `lazy=True` the handle reads messages on demand, as `load(lazy=True)`.

        Raises:
            InvalidIdError: `id` is not a valid id.
            InvalidValueError: the title, tags or metadata are not acceptable.
            ThreadNotFoundError: `id` is held by a thread of another kind (a workflow).
        """
        with contextlib.suppress(ThreadNotFoundError):  # none yet, or not a chat: see below
            return await cls.load(id, store=store, lazy=lazy)
        try:
            created = await cls.create(
                store,
                id=id,
                title=title,
                tags=tags,
                metadata=metadata,
                auto_checkpoint=auto_checkpoint,
            )
        except ConflictError:  # created by another caller since: take theirs
            return await cls.load(id, store=store, lazy=lazy)  # or not a chat: NotFound
        if lazy:
            created._attach(SegmentCache(limit=LAZY_CACHE_LIMIT), lazy=True)
        return created

    @classmethod
    async def _open(
        cls,
        store: ThreadStore,
        record: Record,
        *,
        lazy: bool = False,
        cache_limit: int = LAZY_CACHE_LIMIT,
    ) -> Self:
        state = await cls._read_state(store, record)
        cache = SegmentCache(limit=cache_limit) if lazy else SegmentCache()
        handle = cls._bind(store, record, state)._attach(cache, lazy=lazy)
        if not lazy:  # the history's listing fills the cache with the thread's messages too
            handle._history = await load_history(handle)
        return handle

    # -- reading ------------------------------------------------------------------

    @property
    def head(self) -> int:
        """The number of messages in the thread."""
        return pieces.length(self._ranges)

    @property
    def ranges(self) -> Ranges:
        """The piece table: `(segment_id, start, end)` ranges whose concatenation is the thread."""
        return self._ranges

    @property
    def auto_checkpoint(self) -> bool:
        """Whether each `on_new_messages` batch records a checkpoint."""
        data = self._data
        return isinstance(data, ChatData) and data.auto_checkpoint

    @property
    def is_lazy(self) -> bool:
        """Whether this handle was loaded with `lazy=True` (messages read on demand)."""
        return self._lazy

    @property
    def messages(self) -> Sequence[Message]:
        """All messages, in order (a read-only sequence built in O(1)).

        Raises:
            NotLoadedError: the handle was loaded with `lazy=True`.
        """
        if self._lazy:
            raise NotLoadedError(
                self.id, what="messages", hint="use `await thread.get_messages(start, end)`"
            )
        return MessageList(self._cache, self._ranges)

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]:
        """Messages `start <= i < end`, with slice semantics (negative indexes count from the end).

        Reads from the store only what is not in memory yet, so the last K messages of a
        lazily loaded thread cost K row reads whatever its length.
        """
        if not all(isinstance(i, int) for i in (start, end) if i is not None):
            where = f"thread {self.id!r} get_messages({start!r}, {end!r})"
            raise InvalidValueError(where, reason="start and end are ints (or None)")
        lo, hi, _ = slice(start, end).indices(self.head)
        return await self._read(pieces.slice_ranges(self._ranges, lo, hi))

    async def _read(self, ranges: Sequence[Range]) -> list[Message]:
        """The messages of `ranges`, from memory where held, else from the store."""
        await self._fill_cache(ranges)
        try:
            return list(self._cache.iterate(ranges))
        except KeyError:  # a bounded cache let go of part of a read longer than its limit
            found: list[Message] = []
            for page in _pages(ranges):
                found += await self._read_page(page)
            return found

    async def _fill_cache(self, ranges: Sequence[Range]) -> None:
        for page in _pages(self._cache.missing(ranges)):
            self._cache.put(page.segment_id, page.start, await self._read_page(page))

    async def _read_page(self, page: Range) -> list[Message]:
        """The messages of `page`, validated an array of rows per call (`read_row_arrays`).

        If one does not decode, the rows are read again and decoded one by one, to name
        the first that does not.
        """
        arrays = await self._store.read_row_arrays(page.segment_id, page.start, page.end)
        try:
            return decode_arrays(_drained(arrays))
        except ValueError:
            pass
        rows = await self._store.read_rows(page.segment_id, page.start, page.end)
        decoded = []
        for offset, row in enumerate(rows):
            try:
                decoded.append(Message.model_validate_json(row))
            except ValidationError as exc:
                where = f"segment {page.segment_id!r} position {page.start + offset}"
                raise StoreCorruptedError(where, detail=f"undecodable message: {exc}") from exc
        return decoded

    async def index_of(self, message_id: str) -> int:
        """The index of a message in this thread.

        Raises:
            MessageNotFoundError: the thread holds no message with this id.
        """
        index = await self._find(message_id)
        if index is None:
            raise MessageNotFoundError(message_id, thread_id=self.id)
        return index

    async def _find(self, message_id: str) -> int | None:
        places = (
            await self._store.locate_message(message_id)
            if self._lazy
            else self._cache.places(message_id)
        )
        return self._first_index(places)

    def _first_index(self, places: Iterable[tuple[str, int]]) -> int | None:
        """The index in this thread of the first of these rows it holds (None: none)."""
        for segment_id, position in places:
            index = pieces.index_of(self._ranges, segment_id, position)
            if index is not None:
                return index
        return None

    # -- context views (the logic lives in agent_threads.views) --------------------

    async def view(
        self,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        keep_first: int = 0,
        counter: TokenCounter | None = None,
        unanswered_tool_calls: UnansweredToolCalls = "interrupt",
    ) -> ContextView:
        """The messages a model should see: the first `keep_first`, then the newest that fit.

        A tool call and its results are kept or dropped together, the results right after
        their call; a summary appended by `condense` stands for its range. The view is
        cached: after appends, bringing it up to date costs O(new messages). Counts use
        `counter` (default: an approximation).

        A call the thread holds no result for (a process stopped between the call and its
        result, or the newest message's tools are still running) gets, by
        `unanswered_tool_calls`: "interrupt" a synthetic tool result (`is_error=True`,
        "interrupted: no result was recorded for this call") right after it, counted in
        the budgets; "drop" the call left out (and its message, if nothing else remains);
        "error" `UnansweredToolCallError`. Nothing is written: once the real result is
        appended, the next view shows it instead.

        Raises:
            ContextOverflowError: the kept-first messages and the newest group do not fit.
            UnansweredToolCallError: "error", and the view would hold a call without result.
        """
        return await self._view_cache().view(
            self,
            max_tokens=max_tokens,
            max_messages=max_messages,
            keep_first=keep_first,
            counter=counter,
            unanswered_tool_calls=unanswered_tool_calls,
        )

    async def condense(
        self, start_id: str, end_id: str, summary_text: str, **fields: Any
    ) -> Message:
        """Append a summary standing for messages `start_id..end_id` in views; returns it.

        Nothing is deleted: the thread and time travel still see the original messages.
        `fields` (role, author, metadata) go to the summary message.

        Raises:
            MessageNotFoundError: an id is not in the thread.
            ValueError: the range would cut a tool call from its result or part of a summary.
        """
        return await self._view_cache().condense(self, start_id, end_id, summary_text, **fields)

    def invalidate_view(self) -> None:
        """Rebuild the cached view from the messages on the next `view()`."""
        self._view_cache().invalidate()

    def _view_cache(self) -> ViewCache:
        cache: ViewCache | None = getattr(self, "_views", None)
        if cache is None:
            cache = self._views = ViewCache()
        return cache

    # -- appending ----------------------------------------------------------------

    async def on_new_messages(
        self,
        messages: Iterable[Message],
        *,
        checkpoint: bool | str = False,
        checkpoint_metadata: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Checkpoint | None:
        """Append messages, all or nothing, as one store write; with a checkpoint if asked.

        `checkpoint=True` (or a label) also records the thread as it is after the
        append, in the same store write (the per-turn pattern: one round trip, one
        transaction), and returns that checkpoint, holding `checkpoint_metadata` (JSON,
        as `checkpoint(metadata=...)`); so does every append to a thread with
        `auto_checkpoint` (reason "auto", unless a checkpoint was asked for).

        If another handle appended first, this handle re-reads the thread and appends
        after it, waiting a little longer before each new try (see `RetryPolicy`), for up
        to `deadline` seconds (default: the store's `retry` policy, 30 s). Each writer's
        messages keep their order.

        Raises:
            ConflictError: other writers kept winning until the deadline.
            DuplicateMessageError: a message id is already in the thread or the batch.
            InvalidIdError: the checkpoint label is empty, over 128 characters or has
                control characters.
            InvalidValueError: `checkpoint_metadata` is not JSON that reads back as it is.
        """
        batch = _as_messages(messages, self.id)
        label = clean_label(checkpoint) if isinstance(checkpoint, str) else None
        what = f"thread {self.id!r} checkpoint metadata"
        metadata = clean_metadata(checkpoint_metadata, what=what)
        if not batch:
            return None
        rows = _new_rows(batch, self.id)
        policy = self.retry_policy(deadline)
        asked = None if checkpoint is False else _Mark(label, "manual", metadata)
        async with self._lock:
            if self._mark(asked, metadata) is not None and not has_log(self.record_data):
                # checkpoints of version 1: recorded after the append, "auto" as the
                # thread appended to asks (it may be another one with the same id by then)
                await self._append(batch, rows, policy.start(), None, None)
                mark = self._mark(asked, metadata)
                if mark is None:
                    return None
                return await save_checkpoint(
                    self,
                    label=mark.label,
                    metadata=mark.metadata,
                    reason=mark.reason,
                    backoff=policy.start(),
                )
            return await self._append(batch, rows, policy.start(), asked, metadata)

    def _mark(self, asked: _Mark | None, metadata: dict[str, JsonValue]) -> _Mark | None:
        """The checkpoint an append records: the one asked for, else an "auto" one.

        An "auto" one if the thread has `auto_checkpoint`.
        """
        if asked is None and self.auto_checkpoint:
            return _Mark(None, "auto", metadata)
        return asked

    def _fused_mark(
        self, asked: _Mark | None, metadata: dict[str, JsonValue] | None
    ) -> _Mark | None:
        """The checkpoint written with an append, for the thread as this handle read it.

        The one asked for; else, with `metadata` (None: none at all), an "auto" one if
        the thread has `auto_checkpoint` and a log to hold it.
        """
        if asked is not None or metadata is None:
            return asked
        auto = self._mark(None, metadata)  # None for the usual thread: no log to look at
        return auto if auto is not None and has_log(self.record_data) else None

    async def _append(
        self,
        batch: list[Message],
        rows: list[Row],
        backoff: Backoff,
        asked: _Mark | None,
        metadata: dict[str, JsonValue] | None,
    ) -> Checkpoint | None:
        """Write the rows (and the checkpoint's, see `_fused_mark`) in one store write.

        A lost race re-reads the thread and plans again; a position taken while the
        thread did not move holds rows a crash left unpublished, so the next try opens a
        new segment. Whether an "auto" checkpoint goes with the append is decided again
        after each re-read (it may be another thread with the same id by then).

        The first try looks up only the ids not minted for this very batch (see
        `unclaimed`); one after a lost race looks up all: others wrote meanwhile. An id
        found in the thread as this handle holds it, before the handle read the thread
        during this append, is checked again after a re-read: the handle may be stale (a
        rollback or a pop elsewhere took the message out; the thread may be gone).
        """
        force_new = False
        read = False  # whether the thread was read during this append
        mark = self._fused_mark(asked, metadata)
        unchecked = unclaimed(batch)
        while True:
            try:
                await self._check_absent(unchecked)
            except DuplicateMessageError:
                if read:
                    raise
                read = True
                seen = self._record.version
                await self.refresh_unlocked()  # ThreadNotFoundError if the thread is gone
                if self._record.version == seen:
                    raise
                mark = self._fused_mark(asked, metadata)
                continue
            plan = await self._plan_append(batch, rows, force_new=force_new)
            stats = self.stats.add(batch)
            writes = [RowWrite(plan.segment_id, plan.start, plan.rows)]
            content = _content_data(plan.ranges, plan.open_segment, plan.head)
            data = {**content, "stats": stats.as_data()}
            typed = {**_typed_content(plan), "stats": stats}
            made = None
            if mark is not None:
                made = new_checkpoint(
                    self,
                    plan.ranges,
                    last_message_id=batch[-1].id,
                    stats=stats,
                    label=mark.label,
                    reason=mark.reason,
                    metadata=mark.metadata,
                )
                log_write, log_data, typed_log = await plan_log_write(
                    self, made, force_new=force_new
                )
                writes.append(log_write)
                data.update(log_data)
                typed.update(typed_log)
            seen = self._record.version
            try:
                await self.publish(data, writes=writes, typed=typed)
            except ConflictError:
                unchecked = batch
                await self.reread_after_lost_write()
                read = True
                mark = self._fused_mark(asked, metadata)
                force_new = self._record.version == seen  # unchanged: rows a crash left behind
                if not force_new:
                    await self._back_off(backoff)
                continue
            self._cache.put(plan.segment_id, plan.start, plan.messages)
            self._ranges, self._open_segment = plan.ranges, plan.open_segment  # = `_on_bind`
            if made is not None:
                self.remember(made, self.state)
            return made

    async def _back_off(self, backoff: Backoff) -> None:
        if not await backoff.wait():
            raise backoff.exhausted(self.id, "these messages were appended")

    async def _check_absent(self, batch: list[Message]) -> None:
        if not batch:
            return
        if self._lazy:  # the whole batch's ids in one store lookup
            found = await self._store.locate_messages([m.id for m in batch])
            places = {m.id: found[m.id] for m in batch}
        elif self._cache.holds_any(map(_ID, batch)):
            places = {m.id: self._cache.places(m.id) for m in batch}
        else:
            return  # the usual batch: no id is anywhere in memory, so none is in the thread
        for message_id, held in places.items():
            if self._first_index(held) is not None:
                raise DuplicateMessageError(message_id, thread_id=self.id)

    async def _plan_append(
        self, batch: list[Message], rows: list[Row], *, force_new: bool
    ) -> _AppendPlan:
        head = self.head
        owned = self._open_segment
        if not force_new and owned is not None and pieces.can_extend(self._ranges, owned):
            return self._plan_at_head(owned.segment_id, head, batch, rows)
        segment_id = new_id()
        start = pieces.consolidation_start(self._ranges)
        if start is None:
            return self._plan_at_head(segment_id, head, batch, rows)
        moved = await self.get_messages(start, head)  # amortized: see pieces.consolidation_start
        all_messages = moved + batch
        all_rows = _rows(moved) + rows
        end = start + len(all_messages)
        ranges = (*pieces.prefix(self._ranges, start), Range(segment_id, start, end))
        return _AppendPlan(
            segment_id, start, all_rows, all_messages, ranges, OpenSegment(segment_id, end), end
        )

    def _plan_at_head(
        self, segment_id: str, head: int, batch: list[Message], rows: list[Row]
    ) -> _AppendPlan:
        """Write the batch into `segment_id` at the thread's head, `head`."""
        end = head + len(batch)
        ranges = pieces.extend(self._ranges, segment_id, head, len(batch))
        return _AppendPlan(segment_id, head, rows, batch, ranges, OpenSegment(segment_id, end), end)

    async def adopt(self, record: Record, state: ImmutableState | None = None) -> None:
        await super().adopt(record, state)
        if not self._lazy:
            await self._fill_cache(self._ranges)

    # -- removing messages (non-destructively: a checkpoint keeps the old head) --------

    async def pop(self, *, deadline: float | None = None) -> Message | None:
        """Remove the last message from the thread and return it; None if the thread is empty.

        Nothing is deleted: as in `rollback`, the old head is saved as a checkpoint
        (labelled `POP_LABEL`, reason "rollback") in the same store write that moves the
        head back, so `rollback("before-pop")` puts the message back. The state stays as
        it is; the stats lose the message (its count and usage). A compare-and-set like an
        append: if another handle appended first, the last message *as stored* is the one
        removed (this handle re-reads the thread), so concurrent pops never remove the
        same message twice.

        Raises:
            ConflictError: other writers kept moving the thread until the deadline.
        """
        async with self._lock:
            cut = await self._cut_tail(lambda head: head - 1, POP_LABEL, deadline)
        return None if cut is None else cut[0][-1]

    async def clear(self, *, deadline: float | None = None) -> Checkpoint | None:
        """Remove every message; returns the checkpoint of the old head (None: already empty).

        Like `pop` for all messages: the old head is saved as a checkpoint labelled
        `CLEAR_LABEL` in the same store write, so `rollback(checkpoint)` restores them.
        Title, tags, metadata and state stay; the stats return to zero.

        Raises:
            ConflictError: other writers kept moving the thread until the deadline.
        """
        async with self._lock:
            cut = await self._cut_tail(lambda head: 0, CLEAR_LABEL, deadline)
        return None if cut is None else cut[1]

    async def _cut_tail(
        self, keep: Callable[[int], int], label: str, deadline: float | None
    ) -> tuple[list[Message], Checkpoint] | None:
        """Keep the first `keep(head)` messages; returns the removed ones and a checkpoint.

        The checkpoint is the old head's; None means there was nothing to remove. The
        checkpoint and the new head are one write (`append_to_log`); after a lost race
        the thread is re-read and `keep` applied to its new head.
        """
        removed: list[Message] = []

        async def build() -> tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]:
            head = self.head
            count = max(0, keep(head))
            removed[:] = await self.get_messages(count, head)
            if not removed:
                raise _NothingToCut
            saved = await current_checkpoint(self, label, {}, "rollback")
            stats = ThreadStats() if count == 0 else _without(self.stats, removed)
            ranges = pieces.prefix(self._ranges, count)
            return saved, self.state, {**self.rollback_data(ranges), "stats": stats.model_dump()}

        try:
            saved, before = await append_to_log(
                self, build, keep_on_change=False, backoff=self.retry_policy(deadline).start()
            )
        except _NothingToCut:
            return None
        self.remember(saved, before)
        self._on_bind()  # publish took the record; the piece table is read from it here
        return removed, saved

    # -- forks and copies ---------------------------------------------------------

    async def fork(
        self,
        message_id: str | None = None,
        *,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> Self:
        """A new stored thread with this one's messages, up to and including `message_id`.

        Costs O(number of ranges), independent of the number of messages. The fork
        inherits the current state and metadata, and the tags unless `tags` is given
        (checked as in `create`); its stats start at zero unless `reset_stats=False`.
        Parent and fork never see each other's later changes.

        Raises:
            MessageNotFoundError: `message_id` is not in this thread.
            ConflictError: a thread with id `id` already exists.
            InvalidValueError: `tags` are not acceptable (see `create`).
        """
        async with self._lock:
            count = self.head if message_id is None else await self.index_of(message_id) + 1
            ranges = pieces.prefix(self._ranges, count)
            last = (await self.get_messages(count - 1, count))[0] if count else None
            stats = ThreadStats()
            if not reset_stats:
                stats = (
                    self.stats
                    if count == self.head
                    else ThreadStats().add(await self.get_messages(0, count))
                )
            record = self.new_record(
                thread_id=id,
                title=self.title if title is None else title,
                tags=self.tags if tags is None else tags,
                metadata=self.metadata,
                parent_id=self.id,
                fork_point=None if last is None else last.id,
                stats=stats,
                state_digest=self.state_digest,
                extra=self.fork_data(ranges),
            )
            stored = await put_new(self._store, record)
            return (
                type(self)
                ._bind(self._store, stored, self._state)
                ._attach(self._cache, lazy=self._lazy, states=self._shared_states())
            )

    def _data_for_copy(self, data: dict[str, JsonValue]) -> dict[str, JsonValue]:
        data["segment"] = None  # the copy must not extend the original's segment
        return data

    def _share_into(self, twin: Self) -> None:
        twin._attach(self._cache, lazy=self._lazy, states=self._shared_states())

    # -- hooks for checkpoints and time travel (see AgentThread) -------------------------

    def content_ranges(self) -> Ranges:
        return self._ranges

    async def read_ranges(self, ranges: Ranges) -> Sequence[Message]:
        if self._cache.limit is not None:  # a lazy handle's cache may let go of them later
            return await self._read(ranges)
        await self._fill_cache(ranges)
        return MessageList(self._cache, ranges)

    def held_messages(self, ranges: Ranges) -> Sequence[Message]:
        if not self._cache.has(ranges):
            raise NotLoadedError(
                self.id, what="messages of its history", hint="use `await thread.export()`"
            )
        return MessageList(self._cache, ranges)

    def messages_in_memory(self) -> bool:
        return not self._lazy

    def rollback_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        # the open segment stays: appends after the last range's end open a new segment
        return {"ranges": [r.to_json() for r in ranges], "head": pieces.length(ranges)}

    def fork_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        return {**_content_data(ranges, None), "auto_checkpoint": self.auto_checkpoint}

    def bind_fork(self, record: Record, state: ImmutableState) -> Self:
        return (
            type(self)
            ._bind(self._store, record, state)
            ._attach(self._cache, lazy=self._lazy, states=self._shared_states())
        )

    # -- JSON export ----------------------------------------------------------------

    def _held_history(self) -> LoadedHistory | None:
        if self._lazy:
            raise NotLoadedError(
                self.id,
                what="the messages and history",
                hint="`await thread.export()` reads them from the store",
            )
        return self._history

    def _export_content(self) -> dict[str, Any]:
        return {
            "messages": [m.model_dump(mode="json") for m in self.held_messages(self._ranges)],
            "auto_checkpoint": self.auto_checkpoint,
        }

    @classmethod
    def _renamed_export(cls, document: dict[str, Any], thread_id: str) -> dict[str, Any]:
        return {**document, "id": thread_id}  # checkpoints are exported without thread ids

    @classmethod
    async def _import(cls, document: dict[str, Any], store: ThreadStore) -> Self:
        exported = _read_export(document)
        messages = _as_messages(exported.messages, exported.id)
        history = read_history(document)
        pool = [*messages, *history.messages]  # the thread now, then what only checkpoints reach
        rows = _new_rows(pool, exported.id)
        segment_id = new_id()
        ranges = pieces.extend((), segment_id, 0, len(messages))
        open_segment = OpenSegment(segment_id, len(pool)) if pool else None
        state = ImmutableState(exported.state)
        record = cls.new_record(
            thread_id=exported.id,
            title=exported.title,
            tags=document["tags"],  # a `Tags`, read by `from_json` (the export's version)
            metadata=exported.metadata,
            parent_id=exported.parent_id,
            fork_point=exported.fork_point,
            stats=exported.stats,
            state_digest=state.digest if state else None,
            extra={
                **_content_data(ranges, open_segment),
                "auto_checkpoint": exported.auto_checkpoint,
            },
        )
        if exported.created_at is not None:
            record = record.model_copy(
                update={"data": {**record.data, "created_at": exported.created_at}}
            )
        plan = plan_history(record, segment_id, pool, history)  # all checked: now write
        if await store.get_record(THREAD_KIND, record.id) is not None:
            raise thread_exists(record.id)
        if state:
            await store.put_blob(state.to_json_bytes())
        if pool:  # rows before the records: a crash leaves orphans, not a torn thread
            await store.append_rows(segment_id, 0, rows)
        stored, imported = await store_history(store, plan)
        handle = cls._bind(store, stored, state)._attach(
            SegmentCache(), lazy=False, states=imported.states
        )
        handle._cache.put(segment_id, 0, pool)
        handle._history = imported  # its states now hold the thread's state too (shared)
        return handle


class _ChatExport(BaseModel):
    """The fields of a chat thread's export document (`to_json`), typed.

    All but `tags`, which `AgentThread.from_json` reads by the document's version.
    """

    model_config = ConfigDict(extra="ignore")
    id: str
    title: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    parent_id: str | None = None
    fork_point: str | None = None
    created_at: str | None = None
    stats: ThreadStats = Field(default_factory=ThreadStats)
    state: dict[str, JsonValue] = Field(default_factory=dict)
    messages: tuple[Message, ...] = ()
    auto_checkpoint: bool = False

    @field_validator("created_at")
    @classmethod
    def _is_a_time(cls, value: str | None) -> str | None:
        if value is not None and datetime.fromisoformat(value).tzinfo is None:
            raise ValueError("created_at needs a time zone")
        return value


def _read_export(document: dict[str, Any]) -> _ChatExport:
    """The document's fields, checked before anything is written.

    Raises:
        InvalidValueError: a field is missing or of the wrong type, naming it.
    """
    try:
        return _ChatExport.model_validate(document)
    except ValidationError as exc:
        where = f"thread export {document.get('id')!r}"
        raise InvalidValueError(where, reason=validation_problems(exc)) from exc


__all__ = ["CLEAR_LABEL", "POP_LABEL", "THREAD_KIND", "ChatMessageThread"]
