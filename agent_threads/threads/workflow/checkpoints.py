"""Workflow checkpoints: a consistent cut across every sub-thread plus the execution state.

A workflow checkpoint is a record owned by the workflow thread. It references one
checkpoint of each sub-thread (which holds that sub-thread's ranges), and holds the step
log's ranges, the inline execution data and the shared state's digest. Writing one
costs O(number of sub-threads) and never copies a message or a step record; a
sub-thread unchanged since the last cut reuses that cut's checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_threads.core.ids import validate_id
from agent_threads.core.records import clean_metadata
from agent_threads.errors import (
    CheckpointNotFoundError,
    InvalidIdError,
    SchemaVersionError,
    StoreCorruptedError,
    SubThreadNotFoundError,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData, ExecutionState, RunStatus
from agent_threads.threads.workflow.step_log import StepLog
from agent_threads.timetravel.checkpoints import (
    Checkpoint,
    CheckpointReason,
    Point,
    ThreadSnapshot,
    clean_label,
)

if TYPE_CHECKING:
    from agent_threads.threads.workflow.thread import WorkflowThread

WORKFLOW_CHECKPOINT_KIND = "workflow_checkpoint"
"""The store record kind of workflow checkpoints; `Record.owner` is the workflow id."""

_SCHEMA_VERSION = 1
_FROZEN = ConfigDict(frozen=True, extra="forbid")

WorkflowT = TypeVar("WorkflowT", bound="WorkflowThread")


class SubThreadCut(BaseModel):
    """Where one sub-thread stood at a workflow checkpoint: its id and its checkpoint."""

    model_config = _FROZEN
    thread_id: str
    checkpoint_id: str


class WorkflowCheckpoint(Checkpoint):
    """A saved point of a whole workflow: every sub-thread, the step log and the state.

    A workflow has no messages of its own: its content is its step log, so `ranges`
    and `message_count` describe the step records (`history_length`), while each
    sub-thread's messages are in the sub-thread checkpoint `sub_threads` names.
    `reason` is `"auto"` for the runner's checkpoint after each superstep,
    `"rollback"` for the head a rollback saved, `"manual"` otherwise.
    """

    superstep: int = Field(ge=0)
    status: RunStatus
    sub_threads: dict[str, SubThreadCut] = Field(default_factory=dict)

    @property
    def history_length(self) -> int:
        """How many step records the history held."""
        return self.message_count


@dataclass(frozen=True, slots=True)
class StoredCut:
    """A workflow checkpoint as stored: its public part and what restoring it needs."""

    checkpoint: WorkflowCheckpoint
    execution: ExecutionData

    @property
    def step_log(self) -> StepLog:
        return StepLog(self.checkpoint.piece_table, None)


def cut_record(cut: StoredCut) -> Record:
    """The store record of a workflow checkpoint (`ranges`/`blobs` keep data alive)."""
    cp = cut.checkpoint
    data = cp.model_dump(mode="json", exclude={"id", "thread_id"})
    data["schema_version"] = _SCHEMA_VERSION
    data["execution"] = cut.execution.model_dump(mode="json")
    data["blobs"] = [cp.state_digest] if cp.state_digest else []
    tags = (cp.label,) if cp.label else ()
    return Record(kind=WORKFLOW_CHECKPOINT_KIND, id=cp.id, owner=cp.thread_id, tags=tags, data=data)


def parse_cut(record: Record) -> StoredCut:
    """Read a workflow checkpoint record.

    Raises:
        SchemaVersionError: it was written by a newer version.
        StoreCorruptedError: it cannot be decoded.
    """
    data = dict(record.data)
    found = data.pop("schema_version", None)
    data.pop("blobs", None)
    SchemaVersionError.check(
        found, f"workflow checkpoint {record.id!r} record", newest=_SCHEMA_VERSION
    )
    try:
        execution = ExecutionData.model_validate(data.pop("execution", None) or {})
        checkpoint = WorkflowCheckpoint.model_validate(
            {**data, "id": record.id, "thread_id": record.owner}
        )
    except ValidationError as exc:
        raise StoreCorruptedError(f"workflow checkpoint {record.id!r}", detail=str(exc)) from exc
    return StoredCut(checkpoint, execution)


class CutMaker:
    """Writes the cuts of one workflow handle, reusing unchanged sub-thread checkpoints."""

    def __init__(self, workflow: WorkflowThread) -> None:
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
        for key, handle in workflow._handles.items():
            subs[key] = SubThreadCut(
                thread_id=handle.id, checkpoint_id=await self._sub_checkpoint(key, handle)
            )
        checkpoint = WorkflowCheckpoint(
            id=checkpoint_id,
            thread_id=workflow.id,
            label=clean[0],
            reason=reason,
            created_at=datetime.now(UTC),
            message_count=step_log.length,
            metadata=clean[1],
            stats=workflow.stats,
            state_digest=state_digest,
            ranges=tuple((r.segment_id, r.start, r.end) for r in step_log.ranges),
            superstep=execution.superstep,
            status=execution.status,
            sub_threads=subs,
        )
        await workflow.store.put_record(
            cut_record(StoredCut(checkpoint, execution)), expected_version=0
        )
        return checkpoint

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
        and checkpoint.state_digest == handle.record.data.get("state")
        and checkpoint.stats == handle.stats
    )


async def list_cuts(workflow: WorkflowThread) -> list[WorkflowCheckpoint]:
    """The workflow's checkpoints, oldest first (ids are time-ordered)."""
    records = await workflow.store.list_records(WORKFLOW_CHECKPOINT_KIND, owner=workflow.id)
    return [parse_cut(r).checkpoint for r in records]


async def find_cut(workflow: WorkflowThread, checkpoint: Checkpoint | str) -> StoredCut:
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
    workflow: WorkflowThread, cut: StoredCut, key: str, *, lazy: bool
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
    handle = workflow._handles.get(key)
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
        tags: Sequence[str] | None = None,
        reset_stats: bool = True,
    ) -> WorkflowT:
        """A new workflow thread starting from this cut, with status `idle`.

        Each sub-thread is forked at its checkpoint of the cut and the step log is
        shared, so this costs O(number of sub-threads), whatever the run's length.

        Raises:
            ConflictError: a thread with id `id` already exists.
        """
        return await self._thread._fork_cut(self._cut, id=id, title=title, tags=tags)

    def __repr__(self) -> str:
        return (
            f"<WorkflowSnapshot thread_id={self.thread_id!r} checkpoint={self.checkpoint.id!r}"
            f" superstep={self.checkpoint.superstep} status={self.checkpoint.status}>"
        )
