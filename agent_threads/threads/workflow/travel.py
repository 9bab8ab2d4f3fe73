"""Time travel, rollback and forks of whole workflows (every sub-thread at one cut).

The functions here read a workflow through `WorkflowParts` and return what changes
(`Restored`, `Forked`); the workflow thread applies it to itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import JsonValue

from agent_threads.core import pieces
from agent_threads.core.records import put_new, read_state
from agent_threads.errors import ConflictError
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.checkpoints import (
    StoredCut,
    WorkflowSnapshot,
    sub_thread_at,
)
from agent_threads.threads.workflow.execution import (
    ExecutionData,
    ExecutionState,
    RunStatus,
    StepRecord,
)
from agent_threads.threads.workflow.protocol import WorkflowParts
from agent_threads.threads.workflow.records import CREATED_LABEL, workflow_data
from agent_threads.threads.workflow.step_log import StepLog, read_records

WorkflowT = TypeVar("WorkflowT", bound=WorkflowParts)


@dataclass(frozen=True, slots=True)
class ForkOptions:
    """What a caller of `fork` chose for the new workflow (None: the parent's)."""

    id: str | None = None
    title: str | None = None
    tags: Iterable[str] | None = None
    reset_stats: bool = True


@dataclass(frozen=True, slots=True)
class Restored:
    """What a rollback to a cut puts in place; `data` is the record data besides execution."""

    sub_threads: dict[str, ChatMessageThread]
    execution: ExecutionData
    step_log: StepLog
    state: ImmutableState
    closed: list[StepRecord]
    data: dict[str, JsonValue]


@dataclass(frozen=True, slots=True)
class Forked:
    """A stored fork's record, and what a handle on it holds in memory."""

    record: Record
    state: ImmutableState
    closed: list[StepRecord]
    sub_threads: dict[str, ChatMessageThread]


# -- reading a cut ------------------------------------------------------------------------


async def snapshot(workflow: WorkflowT, cut: StoredCut) -> WorkflowSnapshot[WorkflowT]:
    """The read-only workflow at a cut."""
    closed, length = await closed_for(workflow, cut.step_log)
    state = await state_for(workflow, cut.checkpoint.state_digest)
    execution = ExecutionState.build(cut.execution, closed, state, length=length)
    return WorkflowSnapshot(workflow, cut, state, execution)


async def closed_for(
    workflow: WorkflowParts, step_log: StepLog
) -> tuple[Sequence[StepRecord], int]:
    """The step records of `step_log`: a prefix of the workflow's when it is one, else read."""
    if pieces.common_prefix(workflow.step_log.ranges, step_log.ranges) >= step_log.length:
        return workflow.closed_steps, step_log.length
    records = await read_records(workflow.store, step_log.ranges)
    return records, len(records)


async def state_for(workflow: WorkflowParts, digest: str | None) -> ImmutableState:
    """The state stored under `digest` (the workflow's own without a read)."""
    if digest == workflow.state_digest:
        return workflow.state
    return await read_state(workflow.store, digest, owner=f"workflow {workflow.id!r}")


# -- rollback -----------------------------------------------------------------------------


async def restore(workflow: WorkflowParts, cut: StoredCut) -> Restored:
    """Roll every sub-thread of `cut` back to it; what the workflow then takes and publishes.

    Caller holds the workflow's lock and has saved its head first.
    """
    handles: dict[str, ChatMessageThread] = {}
    for key, place in cut.checkpoint.sub_threads.items():
        handles[key] = await sub_thread_at(workflow, cut, key, lazy=False)
        await handles[key].rollback(place.checkpoint_id)
    digest = cut.checkpoint.state_digest
    status = _restored_status(cut.execution.status)
    execution = cut.execution.model_copy(update={"status": status, "checkpoint": cut.checkpoint.id})
    data: dict[str, JsonValue] = {
        **workflow_data(sub_threads={k: h.id for k, h in handles.items()}, step_log=cut.step_log),
        "state": digest,
        "blobs": workflow.blob_refs(digest),
    }
    state = await state_for(workflow, digest)
    closed, length = await closed_for(workflow, cut.step_log)
    return Restored(handles, execution, cut.step_log, state, list(closed[:length]), data)


def _restored_status(status: RunStatus) -> RunStatus:
    return "idle" if status == "running" else status


# -- forks --------------------------------------------------------------------------------


async def fork_head(workflow: WorkflowParts, options: ForkOptions) -> Forked:
    """A new workflow from the workflow's head: each sub-thread forked at its head."""
    subs = {
        k: await h.fork(reset_stats=options.reset_stats) for k, h in workflow.sub_threads.items()
    }
    return await _new_fork(
        workflow,
        subs,
        _Source(
            workflow.execution_data, workflow.step_log, workflow.state_digest, workflow.closed_steps
        ),
        fork_point=None,
        options=options,
    )


async def fork_cut(workflow: WorkflowParts, cut: StoredCut, options: ForkOptions) -> Forked:
    """A new workflow from a cut: each sub-thread forked at its checkpoint of the cut."""
    subs = await _subs_at_cut(workflow, cut, options.reset_stats)
    return await _new_fork(
        workflow, subs, await _source(workflow, cut), fork_point=cut.checkpoint.id, options=options
    )


@dataclass(frozen=True, slots=True)
class _Source:
    """The execution, step log, state and step records a fork starts from."""

    execution: ExecutionData
    step_log: StepLog
    state_digest: str | None
    closed: Sequence[StepRecord]


async def _source(workflow: WorkflowParts, cut: StoredCut) -> _Source:
    closed, length = await closed_for(workflow, cut.step_log)
    return _Source(cut.execution, cut.step_log, cut.checkpoint.state_digest, closed[:length])


async def _subs_at_cut(
    workflow: WorkflowParts, cut: StoredCut, reset_stats: bool, *, skip: str | None = None
) -> dict[str, ChatMessageThread]:
    """Each sub-thread of the cut (but `skip`) forked at its checkpoint of the cut."""
    subs: dict[str, ChatMessageThread] = {}
    for key, place in cut.checkpoint.sub_threads.items():
        if key == skip:
            continue
        sub = await sub_thread_at(workflow, cut, key, lazy=True)
        snapshot = await sub.at(place.checkpoint_id)
        subs[key] = await snapshot.fork(reset_stats=reset_stats)
    return subs


async def _new_fork(
    workflow: WorkflowParts,
    subs: dict[str, ChatMessageThread],
    source: _Source,
    *,
    fork_point: str | None,
    options: ForkOptions,
) -> Forked:
    for sub in subs.values():
        if sub.head == 0:  # so a crashed step on it can be rolled back to empty
            await sub.checkpoint(CREATED_LABEL)
    idle = source.execution.model_copy(update={"status": "idle", "checkpoint": None})
    record = workflow.new_record(
        thread_id=options.id,
        title=workflow.title if options.title is None else options.title,
        tags=workflow.tags if options.tags is None else options.tags,
        metadata=workflow.metadata,
        parent_id=workflow.id,
        fork_point=fork_point,
        state_digest=source.state_digest,
        extra=workflow_data(
            sub_threads={k: s.id for k, s in subs.items()},
            execution=idle,
            step_log=source.step_log.shared(),
        ),
    )
    try:
        stored = await put_new(workflow.store, record)
    except ConflictError:
        for sub in subs.values():
            await sub.delete()
        raise
    state = await state_for(workflow, source.state_digest)
    return Forked(stored, state, list(source.closed), subs)
