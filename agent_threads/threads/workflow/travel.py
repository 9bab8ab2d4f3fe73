"""Time travel, rollback and forks of whole workflows (every sub-thread at one cut).

The functions here read a workflow through `WorkflowParts` and return what changes
(`Restored`, `Forked`); the workflow thread applies it to itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import JsonValue

from agent_threads.core import pieces
from agent_threads.core.records import put_new, read_state
from agent_threads.errors import ConflictError, MessageNotFoundError
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.checkpoints import (
    StoredCut,
    WorkflowSnapshot,
    stored_cuts,
    sub_thread_at,
)
from agent_threads.threads.workflow.execution import (
    ExecutionData,
    ExecutionState,
    RunStatus,
    StepRecord,
    latest_attempts,
)
from agent_threads.threads.workflow.protocol import WorkflowParts
from agent_threads.threads.workflow.records import CREATED_LABEL, workflow_data
from agent_threads.threads.workflow.step_log import StepLog, read_records
from agent_threads.timetravel.checkpoint import Checkpoint

WorkflowT = TypeVar("WorkflowT", bound=WorkflowParts)


@dataclass(frozen=True, slots=True)
class ForkOptions:
    """What a caller of `fork` chose for the new workflow (None: the parent's)."""

    id: str | None = None
    title: str | None = None
    tags: Mapping[str, str] | None = None
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


async def fork_at_message(workflow: WorkflowParts, message_id: str, options: ForkOptions) -> Forked:
    """A new workflow whose sub-thread holding `message_id` ends with it.

    The other sub-threads and the execution are those of `cut_at_message`'s cut, or
    the workflow's head when it finds none. The fork's `fork_point` is the message.

    Raises:
        MessageNotFoundError: no sub-thread holds the message (naming the workflow).
        ValueError: several sub-threads hold it.
    """
    key, sub, count = await _holder(workflow, message_id)
    cut = await cut_at_message(workflow, key, sub, count)
    own = await sub.fork(message_id, reset_stats=options.reset_stats)
    if cut is None:
        others = {
            k: await h.fork(reset_stats=options.reset_stats)
            for k, h in workflow.sub_threads.items()
            if k != key
        }
        subs = {k: own if k == key else others[k] for k in workflow.sub_threads}
        source = _Source(
            workflow.execution_data, workflow.step_log, workflow.state_digest, workflow.closed_steps
        )
    else:
        others = await _subs_at_cut(workflow, cut, options.reset_stats, skip=key)
        keys = dict.fromkeys([*cut.checkpoint.sub_threads, key])  # the cut's order
        subs = {k: own if k == key else others[k] for k in keys}
        source = await _source(workflow, cut)
    return await _new_fork(workflow, subs, source, fork_point=message_id, options=options)


async def _holder(workflow: WorkflowParts, message_id: str) -> tuple[str, ChatMessageThread, int]:
    """The key and handle of the sub-thread holding the message, and its count up to it."""
    found: list[tuple[str, ChatMessageThread, int]] = []
    for key, sub in workflow.sub_threads.items():
        try:
            found.append((key, sub, await sub.index_of(message_id) + 1))
        except MessageNotFoundError:
            continue
    if not found:
        raise MessageNotFoundError(message_id, thread_id=workflow.id)
    if len(found) > 1:
        keys = [key for key, _, _ in found]
        raise ValueError(
            f"message {message_id!r} is in sub-threads {keys} of workflow {workflow.id!r}, so"
            " the fork's cut is ambiguous: fork the workflow at a checkpoint, or fork one"
            " sub-thread (`await (await wt.get_sub_thread(key)).fork(message_id=...)`)"
        )
    return found[0]


async def cut_at_message(
    workflow: WorkflowParts, key: str, sub: ChatMessageThread, count: int
) -> StoredCut | None:
    """The workflow checkpoint that shows the workflow when sub-thread `key` reached a message.

    `count` is the sub-thread's length up to and including the message. Each cut shows
    the sub-thread holding some prefix of those messages (none if it did not exist
    yet); the earliest cut showing all of them wins (the end of the superstep whose
    step wrote the message), else the one showing the most (the superstep boundary
    before the message; the newest among equals). A cut is passed over when the
    sub-thread there holds other messages (another path), or when an attempt under
    way there on that sub-thread started below the message (a resume would roll the
    message back). None: no cut qualifies (or the workflow has none).
    """
    cuts = await stored_cuts(workflow)
    if not cuts:
        return None
    target = pieces.prefix(sub.ranges, count)
    recorded = {c.id: c for c in await sub.checkpoints()}
    best, best_held = None, -1
    for cut in cuts:  # oldest first
        held = _held_at(cut, key, sub.id, recorded, target)
        if held is None or _rewinds_below(cut.execution, key, count):
            continue
        if held >= best_held:
            best, best_held = cut, held
        if best_held == count:
            break
    return best


def _held_at(
    cut: StoredCut, key: str, sub_id: str, recorded: Mapping[str, Checkpoint], target: pieces.Ranges
) -> int | None:
    """How many of `target`'s first messages the sub-thread held at `cut` (None: others)."""
    place = cut.checkpoint.sub_threads.get(key)
    if place is None or place.thread_id != sub_id:
        return 0  # the sub-thread did not exist yet (or another one had its key)
    checkpoint = recorded.get(place.checkpoint_id)
    if checkpoint is None:
        return None
    if pieces.common_prefix(checkpoint.piece_table, target) < checkpoint.message_count:
        return None
    return checkpoint.message_count


def _rewinds_below(execution: ExecutionData, key: str, count: int) -> bool:
    """Whether resuming from `execution` would roll sub-thread `key` back below `count`."""
    return any(
        r.key == key and r.status != "completed" and r.thread_head < count
        for r in latest_attempts(execution.current)
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
