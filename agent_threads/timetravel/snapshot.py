"""ThreadSnapshot: a thread as it was at a point of its history, read-only and forkable.

A `Point` is a position of a thread's history: a piece table (ranges), a state digest
and stats. Segment rows below a recorded end never change, so a snapshot reading
through a point's ranges stays exactly as it was, whatever happens to the thread later.
`checkpoints.py` resolves checkpoints and messages to points; this module shows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NoReturn, TypeVar

from agent_threads.core import pieces
from agent_threads.core.pieces import Ranges
from agent_threads.core.records import ThreadStats, put_new
from agent_threads.errors import NotLoadedError, ReadOnlyError
from agent_threads.messages import Message
from agent_threads.state import ImmutableState
from agent_threads.timetravel.protocol import CheckpointedThread

if TYPE_CHECKING:
    from agent_threads.timetravel.checkpoint import Checkpoint

ThreadT = TypeVar("ThreadT", bound=CheckpointedThread)


@dataclass(frozen=True, slots=True)
class Point:
    """A position of a thread's history: its content, state and stats there.

    What a `ThreadSnapshot` shows; `checkpoint` is the checkpoint it came from, if any.
    """

    ranges: Ranges
    state_digest: str | None
    stats: ThreadStats
    last_message_id: str | None = None
    checkpoint: Checkpoint | None = None

    @property
    def count(self) -> int:
        return pieces.length(self.ranges)


async def fork_point(
    thread: ThreadT,
    point: Point,
    state: ImmutableState,
    *,
    id: str | None,
    title: str | None,
    tags: Mapping[str, str] | None,
    reset_stats: bool,
) -> ThreadT:
    """A new stored thread holding a point's messages and state, forked from `thread`.

    Its tags are `tags` (checked by `new_record`), else the thread's.
    """
    record = thread.new_record(
        thread_id=id,
        title=thread.title if title is None else title,
        tags=thread.tags if tags is None else tags,
        metadata=thread.metadata,
        parent_id=thread.id,
        fork_point=point.last_message_id,
        stats=ThreadStats() if reset_stats else point.stats,
        state_digest=point.state_digest,
        extra=thread.fork_data(point.ranges),
    )
    return thread.bind_fork(await put_new(thread.store, record), state)


class ThreadSnapshot(Generic[ThreadT]):
    """A thread as it was at a checkpoint or message: messages, state and stats, read-only.

    Made by `await thread.at(...)`. It reads through that point's ranges, whose segment
    rows never change, so it stays exactly as it was whatever happens to the thread
    later. Every write raises `ReadOnlyError`; `await snapshot.fork()` makes a live
    thread from it.
    """

    __slots__ = ("_messages", "_point", "_state", "_thread")

    _thread: ThreadT
    _point: Point
    _state: ImmutableState
    _messages: Sequence[Message] | None

    def __init__(
        self,
        thread: ThreadT,
        point: Point,
        state: ImmutableState,
        messages: Sequence[Message] | None,
    ) -> None:
        object.__setattr__(self, "_thread", thread)
        object.__setattr__(self, "_point", point)
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_messages", messages)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise self._read_only(f"setting {name!r}")

    def _read_only(self, what: str) -> ReadOnlyError:
        return ReadOnlyError(
            f"a snapshot of thread {self.thread_id!r} ({what})",
            hint="`await snapshot.fork()` makes a live thread from it",
        )

    @property
    def thread_id(self) -> str:
        """The id of the thread this is a snapshot of."""
        return self._thread.id

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint it shows, or None for a snapshot `at(message_id=...)`."""
        return self._point.checkpoint

    @property
    def message_count(self) -> int:
        """How many messages the thread held then."""
        return self._point.count

    @property
    def last_message_id(self) -> str | None:
        """The id of its last message, if any."""
        return self._point.last_message_id

    @property
    def ranges(self) -> Ranges:
        """Its piece table."""
        return self._point.ranges

    @property
    def state(self) -> ImmutableState:
        """The state then."""
        return self._state

    @property
    def stats(self) -> ThreadStats:
        """The stats then."""
        return self._point.stats

    @property
    def messages(self) -> Sequence[Message]:
        """Its messages, in order.

        Raises:
            NotLoadedError: the thread handle was loaded with `lazy=True`.
        """
        if self._messages is None:
            raise NotLoadedError(
                self.thread_id,
                what="the snapshot's messages",
                hint="use `await snapshot.get_messages(start, end)`",
            )
        return self._messages

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]:
        """Messages `start <= i < end` (slice semantics), read from the store if needed."""
        lo, hi, _ = slice(start, end).indices(self._point.count)
        return list(await self._thread.read_ranges(pieces.slice_ranges(self.ranges, lo, hi)))

    async def fork(
        self,
        *,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> ThreadT:
        """A new live thread holding this snapshot's messages and state.

        Its parent is the snapshot's thread and its `fork_point` the snapshot's last
        message. Title, tags and metadata are the thread's current ones unless given;
        stats start at zero unless `reset_stats=False`. Costs O(number of ranges).

        Raises:
            ConflictError: a thread with id `id` already exists.
            InvalidValueError: `tags` are not acceptable (see `ChatMessageThread.create`).
        """
        return await fork_point(
            self._thread,
            self._point,
            self._state,
            id=id,
            title=title,
            tags=tags,
            reset_stats=reset_stats,
        )

    async def on_new_messages(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises `ReadOnlyError`: a snapshot never changes."""
        raise self._read_only("on_new_messages")

    async def update_state(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises `ReadOnlyError`: a snapshot never changes."""
        raise self._read_only("update_state")

    async def update(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises `ReadOnlyError`: a snapshot never changes."""
        raise self._read_only("update")

    async def rollback(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises `ReadOnlyError`: roll the thread back instead."""
        raise self._read_only("rollback")

    async def delete(self, *args: object, **kwargs: object) -> NoReturn:
        """Always raises `ReadOnlyError`: a snapshot has nothing stored to delete."""
        raise self._read_only("delete")

    def __repr__(self) -> str:
        where = (
            f"checkpoint={self.checkpoint.id!r}"
            if self.checkpoint
            else f"message_id={self.last_message_id!r}"
        )
        return (
            f"<ThreadSnapshot thread_id={self.thread_id!r} {where} messages={self.message_count}>"
        )


__all__ = ["Point", "ThreadSnapshot", "fork_point"]
