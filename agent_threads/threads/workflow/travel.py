"""Time travel, rollback and forks of whole workflows (every sub-thread at one cut)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from pydantic import JsonValue

from agent_threads.core import pieces
from agent_threads.core.ids import new_id
from agent_threads.core.records import put_new, read_state
from agent_threads.errors import ConflictError
from agent_threads.state import ImmutableState
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.checkpoints import (
    StoredCut,
    WorkflowCheckpoint,
    WorkflowSnapshot,
    sub_thread_at,
)
from agent_threads.threads.workflow.execution import (
    ExecutionData,
    ExecutionState,
    RunStatus,
    StepRecord,
)
from agent_threads.threads.workflow.records import CREATED_LABEL, initial_data
from agent_threads.threads.workflow.step_log import StepLog, read_records
from agent_threads.timetravel.checkpoints import ROLLBACK_LABEL

if TYPE_CHECKING:
    from agent_threads.threads.workflow.thread import WorkflowThread

WorkflowT = TypeVar("WorkflowT", bound="WorkflowThread")


async def snapshot(workflow: WorkflowT, cut: StoredCut) -> WorkflowSnapshot[WorkflowT]:
    """The read-only workflow at a cut."""
    closed, length = await closed_for(workflow, cut.step_log)
    state = await state_for(workflow, cut.checkpoint.state_digest)
    execution = ExecutionState.build(cut.execution, closed, state, length=length)
    return WorkflowSnapshot(workflow, cut, state, execution)


async def closed_for(workflow: WorkflowThread, step_log: StepLog) -> tuple[list[StepRecord], int]:
    """The step records of `step_log`: a prefix of the workflow's when it is one, else read."""
    if pieces.common_prefix(workflow._log.ranges, step_log.ranges) >= step_log.length:
        return workflow._closed, step_log.length
    records = await read_records(workflow.store, step_log.ranges)
    return records, len(records)


async def state_for(workflow: WorkflowThread, digest: str | None) -> ImmutableState:
    """The state stored under `digest` (the workflow's own without a read)."""
    if digest == workflow._digest():
        return workflow.state
    return await read_state(workflow.store, digest, owner=f"workflow {workflow.id!r}")


async def rollback(workflow: WorkflowThread, cut: StoredCut) -> WorkflowCheckpoint:
    """Roll every sub-thread and the execution back to `cut`. Caller holds the lock."""
    saved = await workflow._cuts.write(
        new_id(),
        workflow._exec,
        workflow._log,
        workflow._digest(),
        label=ROLLBACK_LABEL,
        metadata={"rolled_back_to": cut.checkpoint.id},
        reason="rollback",
    )
    handles: dict[str, ChatMessageThread] = {}
    for key, place in cut.checkpoint.sub_threads.items():
        handles[key] = await sub_thread_at(workflow, cut, key, lazy=False)
        await handles[key].rollback(place.checkpoint_id)
    await _restore(workflow, cut, handles)
    return saved


async def _restore(
    workflow: WorkflowThread, cut: StoredCut, handles: dict[str, ChatMessageThread]
) -> None:
    digest = cut.checkpoint.state_digest
    status = _restored_status(cut.execution.status)
    execution = cut.execution.model_copy(update={"status": status, "checkpoint": cut.checkpoint.id})
    keys = {k: h.id for k, h in handles.items()}
    data: dict[str, JsonValue] = {
        "sub_threads": dict[str, JsonValue](keys),
        **cut.step_log.to_data(),
        "state": digest,
        "blobs": workflow.blob_refs(digest),
    }
    state = await state_for(workflow, digest)
    closed, length = await closed_for(workflow, cut.step_log)
    await workflow._publish_execution(execution, data)
    workflow._keys, workflow._handles = keys, handles
    workflow._log, workflow._state, workflow._closed = cut.step_log, state, closed[:length]


def _restored_status(status: RunStatus) -> RunStatus:
    return "idle" if status == "running" else status


async def fork_head(
    workflow: WorkflowT,
    *,
    id: str | None,
    title: str | None,
    tags: Iterable[str] | None,
    reset_stats: bool = True,
) -> WorkflowT:
    """A new workflow from the workflow's head: each sub-thread forked at its head."""
    subs = {k: await h.fork(reset_stats=reset_stats) for k, h in workflow._handles.items()}
    return await _new_fork(
        workflow,
        subs,
        workflow._exec,
        workflow._log,
        workflow._digest(),
        workflow._closed,
        fork_point=None,
        id=id,
        title=title,
        tags=tags,
    )


async def fork_cut(
    workflow: WorkflowT,
    cut: StoredCut,
    *,
    id: str | None,
    title: str | None,
    tags: Iterable[str] | None,
    reset_stats: bool = True,
) -> WorkflowT:
    """A new workflow from a cut: each sub-thread forked at its checkpoint of the cut."""
    subs: dict[str, ChatMessageThread] = {}
    for key, place in cut.checkpoint.sub_threads.items():
        sub = await sub_thread_at(workflow, cut, key, lazy=True)
        snapshot = await sub.at(place.checkpoint_id)
        subs[key] = await snapshot.fork(reset_stats=reset_stats)
    closed, length = await closed_for(workflow, cut.step_log)
    return await _new_fork(
        workflow,
        subs,
        cut.execution,
        cut.step_log,
        cut.checkpoint.state_digest,
        closed[:length],
        fork_point=cut.checkpoint.id,
        id=id,
        title=title,
        tags=tags,
    )


async def _new_fork(
    workflow: WorkflowT,
    subs: dict[str, ChatMessageThread],
    execution: ExecutionData,
    step_log: StepLog,
    digest: str | None,
    closed: list[StepRecord],
    *,
    fork_point: str | None,
    id: str | None,
    title: str | None,
    tags: Iterable[str] | None,
) -> WorkflowT:
    for sub in subs.values():
        if sub.head == 0:  # so a crashed step on it can be rolled back to empty
            await sub.checkpoint(CREATED_LABEL)
    idle = execution.model_copy(update={"status": "idle", "checkpoint": None})
    record = workflow.new_record(
        thread_id=id,
        title=workflow.title if title is None else title,
        tags=workflow.tags if tags is None else tags,
        metadata=workflow.metadata,
        parent_id=workflow.id,
        fork_point=fork_point,
        state_digest=digest,
        extra=initial_data({k: s.id for k, s in subs.items()}, idle, step_log.shared()),
    )
    try:
        stored = await put_new(workflow.store, record)
    except ConflictError:
        for sub in subs.values():
            await sub.delete()
        raise
    state = await state_for(workflow, digest)
    return type(workflow)._bind(workflow.store, stored, state)._attach(list(closed), subs)
