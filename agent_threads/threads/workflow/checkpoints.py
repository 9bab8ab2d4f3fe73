"""Workflow checkpoints: a consistent cut across every sub-thread plus the execution state.

A workflow checkpoint is a record owned by the workflow thread (its stored form is
`records.CutData`). It references one checkpoint of each sub-thread (which holds that
sub-thread's ranges), and holds the step log's ranges, the inline execution data and
the shared state's digest. Writing one costs O(number of sub-threads) and never copies
a message or a step record; a sub-thread unchanged since the last cut reuses that cut's
checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from pydantic import Field, ValidationError, model_validator

from agent_threads.core.ids import validate_id
from agent_threads.core.records import clean_metadata
from agent_threads.errors import (
    CheckpointNotFoundError,
    InvalidIdError,
    StoreCorruptedError,
    SubThreadNotFoundError,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData, ExecutionState, RunStatus
from agent_threads.threads.workflow.protocol import WorkflowParts
from agent_threads.threads.workflow.records import (
    WORKFLOW_CHECKPOINT_KIND,
    CutData,
    SubThreadCut,
    cut_record,
    read_cut_data,
)
from agent_threads.threads.workflow.step_log import StepLog
from agent_threads.timetravel.checkpoint import Checkpoint, CheckpointReason
from agent_threads.timetravel.checkpoints import clean_label
from agent_threads.timetravel.snapshot import Point, ThreadSnapshot

WorkflowT = TypeVar("WorkflowT", bound=WorkflowParts)


class WorkflowCheckpoint(Checkpoint):
    """A saved point of a whole workflow: every sub-thread, the step history and the state.

    A workflow has no messages of its own, so `message_count` is 0 and `ranges` and
    `last_message_id` are empty: `history_length` is how many step records the
    history held, and each sub-thread's messages are in the sub-thread checkpoint
    `sub_threads` names. `reason` is `"auto"` for the runner's checkpoint after each
    superstep, `"rollback"` for the head a rollback saved, `"manual"` otherwise.
    """

    message_count: int = Field(default=0, ge=0)
    superstep: int = Field(ge=0)
    status: RunStatus
    history_length: int = Field(ge=0)
    sub_threads: dict[str, SubThreadCut] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _no_messages_of_its_own(self) -> Self:
        if self.message_count or self.ranges or self.last_message_id is not None:
            raise ValueError(
                "a workflow checkpoint holds no messages of its own (its sub-threads'"
                " checkpoints do; the step history's length is history_length)"
            )
        return self


@dataclass(frozen=True, slots=True)
class StoredCut:
    """A workflow checkpoint as stored: its public part and what restoring it needs."""

    checkpoint: WorkflowCheckpoint
    execution: ExecutionData
    step_log: StepLog


def _public(checkpoint_id: str, workflow_id: str, data: CutData) -> WorkflowCheckpoint:
    return WorkflowCheckpoint(
        id=checkpoint_id,
        thread_id=workflow_id,
        label=data.label,
        reason=data.reason,
        created_at=data.created_at,
        metadata=data.metadata,
        stats=data.stats,
        state_digest=data.state_digest,
        superstep=data.superstep,
        status=data.status,
        history_length=data.history_length,
        sub_threads=data.sub_threads,
    )


def parse_cut(record: Record) -> StoredCut:
    """Read a workflow checkpoint record (this version's or an older one).

    Raises:
        SchemaVersionError: it was written by a newer version.
        StoreCorruptedError: it cannot be decoded.
    """
    data = read_cut_data(record)
    if record.owner is None:
        raise StoreCorruptedError(f"workflow checkpoint {record.id!r}", detail="it has no owner")
    try:
        checkpoint = _public(record.id, record.owner, data)
    except ValidationError as exc:
        raise StoreCorruptedError(f"workflow checkpoint {record.id!r}", detail=str(exc)) from exc
    return StoredCut(checkpoint, data.execution, data.step_log)


class CutMaker:
    """Writes the cuts of one workflow handle, reusing unchanged sub-thread checkpoints."""

    def __init__(self, workflow: WorkflowParts) -> None:
        self._workflow = workflow
        self._reuse: dict[str, Checkpoint] = {}  # key -> its sub-thread's last checkpoint

    async def write(
        self,
        checkpoint_id: str,
        execution: ExecutionData,
        step_log: StepLog,
        state_digest: str | None,
        *,
        label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reason: CheckpointReason = "auto",
    ) -> WorkflowCheckpoint:
        """Checkpoint every sub-thread, then store the workflow checkpoint record."""
        workflow = self._workflow
        clean = clean_label(label), clean_metadata(metadata, what="checkpoint metadata")
        subs = {}
        for key, handle in workflow.sub_threads.items():
            subs[key] = SubThreadCut(
                thread_id=handle.id, checkpoint_id=await self._sub_checkpoint(key, handle)
            )
        data = CutData(
            label=clean[0],
            reason=reason,
            created_at=datetime.now(UTC),
            metadata=clean[1],
            stats=workflow.stats,
            state_digest=state_digest,
            superstep=execution.superstep,
            status=execution.status,
            sub_threads=subs,
            history_length=step_log.length,
            ranges=tuple((r.segment_id, r.start, r.end) for r in step_log.ranges),
            execution=execution,
        )
        await workflow.store.put_record(
            cut_record(checkpoint_id, workflow.id, data), expected_version=0
        )
        return _public(checkpoint_id, workflow.id, data)

    async def _sub_checkpoint(self, key: str, handle: ChatMessageThread) -> str:
        known = self._reuse.get(key)
        if known is not None and _shows(known, handle):
            return known.id  # the sub-thread holds what that checkpoint recorded
        checkpoint = await handle.checkpoint(metadata={"workflow_id": self._workflow.id})
        self._reuse[key] = checkpoint
        return checkpoint.id


def _shows(checkpoint: Checkpoint, handle: ChatMessageThread) -> bool:
    """Whether the handle holds exactly what the checkpoint recorded (O(ranges)).

    Compared by content, not record version: a checkpoint's own record write may have
    re-read a handle that was stale, so the handle can show more than it recorded.
    """
    return (
        checkpoint.thread_id == handle.id
        and checkpoint.piece_table == handle.ranges
        and checkpoint.state_digest == handle.state_digest
        and checkpoint.stats == handle.stats
    )


async def stored_cuts(workflow: WorkflowParts) -> list[StoredCut]:
    """The workflow's checkpoints as stored, oldest first (ids are time-ordered)."""
    records = await workflow.store.list_records(WORKFLOW_CHECKPOINT_KIND, owner=workflow.id)
    return [parse_cut(r) for r in records]


async def list_cuts(workflow: WorkflowParts) -> list[WorkflowCheckpoint]:
    """The workflow's checkpoints, oldest first."""
    return [cut.checkpoint for cut in await stored_cuts(workflow)]


async def find_cut(workflow: WorkflowParts, checkpoint: Checkpoint | str) -> StoredCut:
    """The stored checkpoint given as a checkpoint, an id, or a label (newest first).

    Raises:
        CheckpointNotFoundError: the workflow has no such checkpoint.
    """
    if isinstance(checkpoint, Checkpoint):
        checkpoint = checkpoint.id
    if not isinstance(checkpoint, str):
        raise TypeError(f"expected a WorkflowCheckpoint, an id or a label, got {checkpoint!r}")
    store = workflow.store
    try:
        record = await store.get_record(WORKFLOW_CHECKPOINT_KIND, validate_id(checkpoint))
    except InvalidIdError:  # not an id: it can still be a label
        record = None
    if record is not None and record.owner == workflow.id:
        return parse_cut(record)
    try:
        labelled = await store.list_records(
            WORKFLOW_CHECKPOINT_KIND, owner=workflow.id, tags=[checkpoint]
        )
    except InvalidIdError:
        labelled = []
    for found in reversed(labelled):
        cut = parse_cut(found)
        if cut.checkpoint.label == checkpoint:
            return cut
    raise CheckpointNotFoundError(checkpoint, thread_id=workflow.id)


async def sub_thread_at(
    workflow: WorkflowParts, cut: StoredCut, key: str, *, lazy: bool
) -> ChatMessageThread:
    """A handle on the sub-thread `key` of a cut (the workflow's own when it is the same).

    Raises:
        SubThreadNotFoundError: the cut has no such key, or its sub-thread was deleted.
    """
    place = cut.checkpoint.sub_threads.get(key)
    if place is None:
        raise SubThreadNotFoundError(
            key, workflow_id=workflow.id, known=tuple(cut.checkpoint.sub_threads)
        )
    handle = workflow.sub_threads.get(key)
    if handle is not None and handle.id == place.thread_id:
        return handle
    try:
        return await ChatMessageThread.load(place.thread_id, store=workflow.store, lazy=lazy)
    except LookupError as exc:
        raise SubThreadNotFoundError(
            key,
            workflow_id=workflow.id,
            known=tuple(cut.checkpoint.sub_threads),
            detail=f"its thread {place.thread_id!r} was deleted",
        ) from exc


class WorkflowSnapshot(ThreadSnapshot[WorkflowT]):
    """A workflow as it was at a checkpoint: execution state, shared state, sub-threads.

    Read-only, like every `ThreadSnapshot`. `await snapshot.get_sub_thread(key)` gives
    a sub-thread's snapshot at the same cut; `await snapshot.fork()` starts a new,
    `idle` workflow thread from it (resume it with `workflow.resume(fork)`).
    """

    __slots__ = ("_cut", "_execution")

    _cut: StoredCut
    _execution: ExecutionState

    def __init__(
        self, thread: WorkflowT, cut: StoredCut, state: ImmutableState, execution: ExecutionState
    ) -> None:
        cp = cut.checkpoint
        point = Point((), cp.state_digest, cp.stats, None, cp)
        super().__init__(thread, point, state, ())
        object.__setattr__(self, "_cut", cut)
        object.__setattr__(self, "_execution", execution)

    @property
    def checkpoint(self) -> WorkflowCheckpoint:
        """The workflow checkpoint it shows."""
        return self._cut.checkpoint

    @property
    def execution(self) -> ExecutionState:
        """The execution state then (status, step history, current and next steps)."""
        return self._execution

    @property
    def sub_thread_keys(self) -> tuple[str, ...]:
        """The sub-thread keys then."""
        return tuple(self._cut.checkpoint.sub_threads)

    async def get_sub_thread(self, key: str = "main") -> ThreadSnapshot[ChatMessageThread]:
        """The sub-thread `key` as it was at this cut.

        Raises:
            SubThreadNotFoundError: the workflow had no such key then, or it was deleted.
        """
        sub = await sub_thread_at(self._thread, self._cut, key, lazy=False)
        return await sub.at(self._cut.checkpoint.sub_threads[key].checkpoint_id)

    async def fork(
        self,
        *,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> WorkflowT:
        """A new workflow thread starting from this cut, with status `idle`.

        Each sub-thread is forked at its checkpoint of the cut and the step log is
        shared, so this costs O(number of sub-threads), whatever the run's length.

        Raises:
            ConflictError: a thread with id `id` already exists.
        """
        return await self._thread.fork(
            checkpoint=self._cut.checkpoint,
            id=id,
            title=title,
            tags=tags,
            reset_stats=reset_stats,
        )

    def __repr__(self) -> str:
        return (
            f"<WorkflowSnapshot thread_id={self.thread_id!r} checkpoint={self.checkpoint.id!r}"
            f" superstep={self.checkpoint.superstep} status={self.checkpoint.status}>"
        )


__all__ = [
    "WORKFLOW_CHECKPOINT_KIND",
    "CutMaker",
    "StoredCut",
    "SubThreadCut",
    "WorkflowCheckpoint",
    "WorkflowSnapshot",
    "find_cut",
    "list_cuts",
    "parse_cut",
    "stored_cuts",
    "sub_thread_at",
]
