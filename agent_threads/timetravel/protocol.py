"""CheckpointedThread: what checkpoints, snapshots, rollback and export need of a thread.

Time travel is written once, over this interface, below the thread classes:
`AgentThread` implements it (its subclasses fill in the content hooks), and nothing in
`timetravel/` imports a thread class or touches a thread's private attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

from pydantic import JsonValue

from agent_threads.core.pieces import Ranges
from agent_threads.core.records import ThreadData, ThreadStats
from agent_threads.core.retry import RetryPolicy
from agent_threads.messages import Message
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record, RowWrite, ThreadStore

if TYPE_CHECKING:
    from agent_threads.timetravel.checkpoint import Checkpoint


class CheckpointedThread(Protocol):
    """A thread handle as time travel sees it: identity, record, content and writes.

    Every method is called with the handle's lock held by the caller (the thread method
    that delegates to `timetravel`), except the read-only properties.
    """

    @property
    def id(self) -> str: ...

    @property
    def store(self) -> ThreadStore: ...

    @property
    def record(self) -> Record:
        """The thread record this handle last read or wrote (version 0: an unsaved copy)."""

    @property
    def record_data(self) -> ThreadData:
        """`record.data`, typed."""

    @property
    def title(self) -> str | None: ...

    @property
    def tags(self) -> Mapping[str, str]: ...

    @property
    def metadata(self) -> Mapping[str, JsonValue]: ...

    @property
    def parent_id(self) -> str | None: ...

    @property
    def fork_point(self) -> str | None: ...

    @property
    def stats(self) -> ThreadStats: ...

    @property
    def state(self) -> ImmutableState: ...

    @property
    def state_digest(self) -> str | None:
        """The content address of `state` as recorded (None: the empty state)."""

    def retry_policy(self, deadline: float | None = None) -> RetryPolicy:
        """How the thread's writes retry lost races (with `deadline` seconds, if given)."""

    def content_ranges(self) -> Ranges:
        """The thread's piece table (what a checkpoint records)."""

    async def read_ranges(self, ranges: Ranges) -> Sequence[Message]:
        """The messages of `ranges`, read from the store if not in memory."""

    def held_messages(self, ranges: Ranges) -> Sequence[Message]:
        """The messages of `ranges`, all in memory (NotLoadedError otherwise)."""

    def messages_in_memory(self) -> bool:
        """Whether snapshots of this handle load their messages eagerly (not lazy)."""

    async def index_of(self, message_id: str) -> int:
        """The index of a message in the thread (MessageNotFoundError if absent)."""

    def rollback_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        """The record data that makes `ranges` the thread's content."""

    def fork_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        """The record data of a new thread whose content is `ranges`."""

    def blob_refs(self, state_digest: str | None) -> list[JsonValue]:
        """The record's `blobs` list when its state is `state_digest`."""

    def new_record(
        self,
        *,
        thread_id: str | None,
        title: str | None,
        tags: Mapping[str, str] | None,
        metadata: Mapping[str, Any] | None,
        parent_id: str | None = None,
        fork_point: str | None = None,
        stats: ThreadStats | None = None,
        state_digest: str | None = None,
        extra: Mapping[str, JsonValue] | None = None,
    ) -> Record:
        """A new (unsaved) record of this thread's type."""

    def bind_fork(self, record: Record, state: ImmutableState) -> Self:
        """A handle on a stored fork of this thread, sharing what it holds in memory."""

    async def publish(
        self, data: Mapping[str, JsonValue], *, writes: Sequence[RowWrite] = ()
    ) -> None:
        """Compare-and-set the record with `data` merged in, and write `writes` with it.

        All or nothing: ConflictError if another writer won (or a position is taken).
        """

    async def reread_after_lost_write(self) -> None:
        """Re-read the thread after a lost compare-and-set, to retry."""

    async def refresh_unlocked(self) -> None:
        """Re-read the thread from the store (the caller holds the lock)."""

    async def adopt(self, record: Record, state: ImmutableState | None = None) -> None:
        """Take `record` (and `state`, if given) as the handle's own."""

    def remember(self, checkpoint: Checkpoint, state: ImmutableState) -> None:
        """Add a checkpoint it made to the history the handle holds for export, if any."""
