"""WorkflowThread: a workflow run's sub-threads (one per agent) and its execution state.

The workflow record holds the key -> sub-thread id map, the inline execution data
(status, the superstep under way, what runs next) and the ranges of the step log;
sub-threads are ordinary `ChatMessageThread`s in the same store. Whole-workflow
checkpoints, time travel, rollback and forks work on every sub-thread at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from types import EllipsisType, MappingProxyType
from typing import Any, Self

import anyio
from pydantic import JsonValue

from agent_threads.core import pieces
from agent_threads.core.ids import new_id, validate_id
from agent_threads.core.records import THREAD_KIND, put_new, thread_exists
from agent_threads.errors import (
    ConflictError,
    StoreCorruptedError,
    SubThreadNotFoundError,
    ThreadNotFoundError,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record, RowWrite, ThreadStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow import travel
from agent_threads.threads.workflow.checkpoints import (
    CutMaker,
    WorkflowCheckpoint,
    WorkflowSnapshot,
    find_cut,
    list_cuts,
)
from agent_threads.threads.workflow.execution import (
    ExecutionData,
    ExecutionState,
    RunStatus,
    StepRecord,
    StepTask,
    now,
)
from agent_threads.threads.workflow.export import export_content, import_parts
from agent_threads.threads.workflow.lease import (
    DEFAULT_LEASE_DURATION,
    LEASE_KEY,
    Lease,
    LeaseKeeper,
    check_duration,
    new_owner,
)
from agent_threads.threads.workflow.records import (
    CREATED_LABEL,
    MAIN,
    WORKFLOW_CHECKPOINT_KIND,
    agent_name,
    check_key,
    new_sub_thread,
    read_workflow_data,
    workflow_data,
)
from agent_threads.threads.workflow.step_log import StepLog, append_records, read_records
from agent_threads.threads.workflow.travel import Forked, ForkOptions
from agent_threads.timetravel.checkpoint import Checkpoint
from agent_threads.timetravel.checkpoints import ROLLBACK_LABEL

_KEEP = ...
_LEASE_POLL = 0.5
"""Seconds between looks at a lease another runner holds, while waiting for it."""


class WorkflowThread(AgentThread):
    """A workflow run: sub-threads keyed by agent, step history, and the run's status.

    The shared workflow state is the thread's `state`. Runners (see the `workflows`
    package) drive it through `update_execution`, `record_step` and `commit_superstep`,
    holding the run's lease (`acquire_lease`) meanwhile: while a runner holds a live
    lease, every other handle's execution write is refused with `RunInProgressError`.
    """

    type_name = "workflow"

    _keys: dict[str, str]
    _handles: dict[str, ChatMessageThread]
    _exec: ExecutionData
    _log: StepLog
    _closed: list[StepRecord]
    _cuts: CutMaker
    _queue: dict[str, StepRecord]
    _queued: int
    _flushed: int
    _lease: Lease | None
    _leases: LeaseKeeper

    def _on_bind(self) -> None:
        # Read here, on bind and refresh, not as the `data_schema` every publish re-reads:
        # the execution data holds a superstep's step records, and a write knows what it set.
        parts = read_workflow_data(self._record)
        self._keys = dict(parts.sub_threads)
        self._exec = parts.execution
        self._log = parts.step_log
        self._lease = parts.lease

    def _attach(self, closed: list[StepRecord], handles: dict[str, ChatMessageThread]) -> Self:
        self._closed = closed
        self._handles = handles
        self._cuts = CutMaker(self)
        self._queue, self._queued, self._flushed = {}, 0, 0
        self._leases = LeaseKeeper(self)
        return self

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
        workflow: str | None = None,
        next: Sequence[StepTask] = (),
    ) -> Self:
        """Create and store a new workflow thread with an empty `"main"` sub-thread.

        `workflow` names the workflow definition that will run it and `next` the steps
        of its first superstep; both are stored with the thread in one write, so a run
        that stops right after creation resumes from its start (status `idle`).

        Raises:
            ConflictError: the store already holds a thread with this id.
            InvalidIdError: `id` is not a valid id.
        """
        store = MemoryStore() if store is None else store
        thread_id = new_id() if id is None else validate_id(id, what="thread id")
        main = await new_sub_thread(store, MAIN, MAIN, title)
        record = cls.new_record(
            thread_id=thread_id,
            title=title,
            tags=tags,
            metadata=metadata,
            extra=workflow_data(
                sub_threads={MAIN: main.id},
                execution=ExecutionData(workflow=workflow, next=tuple(next)),
                step_log=StepLog(),
            ),
        )
        try:
            stored = await put_new(store, record)
        except ConflictError:
            await main.delete()
            raise
        return cls._bind(store, stored, ImmutableState())._attach([], {MAIN: main})

    @classmethod
    async def load(cls, thread_id: str, *, store: ThreadStore) -> Self:
        """Open a stored workflow thread with its sub-threads and step history.

        Raises:
            ThreadNotFoundError: no workflow thread has this id.
            StoreCorruptedError: its record, a sub-thread or the step log is missing or
                cannot be decoded.
        """
        record = await cls._read_record(store, thread_id)
        return await cls._open(store, record)

    @classmethod
    async def _open(cls, store: ThreadStore, record: Record) -> Self:
        state = await cls._read_state(store, record)
        handle = cls._bind(store, record, state)
        closed = await read_records(store, handle._log.ranges)
        handles = {k: await handle._load_sub(k, tid) for k, tid in handle._keys.items()}
        return handle._attach(closed, handles)

    async def _load_sub(self, key: str, thread_id: str) -> ChatMessageThread:
        try:
            return await ChatMessageThread.load(thread_id, store=self._store)
        except ThreadNotFoundError as exc:
            raise StoreCorruptedError(
                f"workflow {self.id!r}", detail=f"sub-thread {key!r} ({thread_id}) is missing"
            ) from exc

    # -- reading ------------------------------------------------------------------

    @property
    def sub_thread_keys(self) -> tuple[str, ...]:
        """The sub-thread keys, in creation order (`"main"` first)."""
        return tuple(self._keys)

    @property
    def sub_thread_ids(self) -> Mapping[str, str]:
        """The id of each sub-thread, by key (read-only)."""
        return MappingProxyType(self._keys)

    @property
    def execution(self) -> ExecutionState:
        """Where the run stands: status, history, current and next steps, shared state."""
        return ExecutionState.build(self._exec, self._closed, self._state)

    @property
    def sub_threads(self) -> Mapping[str, ChatMessageThread]:
        """The sub-thread handles by key, in creation order (read-only).

        The handles `get_sub_thread` returns; a write to one is a write to the sub-thread.
        """
        return MappingProxyType(self._handles)

    # What the workflow's checkpoints, time travel and export read (`WorkflowParts`);
    # applications read `execution` instead.

    @property
    def execution_data(self) -> ExecutionData:
        """The inline execution data, as the workflow record holds it."""
        return self._exec

    @property
    def step_log(self) -> StepLog:
        """The ranges of the step log (and the segment this handle may extend)."""
        return self._log

    @property
    def closed_steps(self) -> Sequence[StepRecord]:
        """The step log's records in memory, oldest first (`execution.history` less `current`).

        The list behind it only grows, or is replaced by a rollback or refresh, so a
        prefix of it read now stays valid.
        """
        return self._closed

    def __repr__(self) -> str:
        return f"<WorkflowThread id={self.id!r} title={self.title!r} status={self._exec.status}>"

    # -- sub-threads ----------------------------------------------------------------

    async def create_sub_thread(self, agent: object, key: str | None = None) -> ChatMessageThread:
        """Create the sub-thread of `agent` (a name or an object with `name`) under `key`.

        The key defaults to the agent's name.

        Raises:
            ConflictError: the workflow already has a sub-thread with this key.
            InvalidIdError: the key is empty, too long or holds control characters.
        """
        name = agent_name(agent)
        key = check_key(name if key is None else key)
        async with self._lock:
            return await self._create_sub_unlocked(name, key)

    async def _create_sub_unlocked(self, name: str, key: str) -> ChatMessageThread:
        if key in self._keys:
            raise ConflictError(
                f"sub-thread {key!r}", detail=f"workflow {self.id!r} already has this key"
            )
        if self._leases.held is not None:
            await self._leases.confirm()
        sub = await new_sub_thread(self._store, key, name, self.title)

        async def write() -> None:
            if key in self._keys:  # another handle added it meanwhile
                raise ConflictError(
                    f"sub-thread {key!r}", detail=f"workflow {self.id!r} already has this key"
                )
            keys = {**self._keys, key: sub.id}
            await self.publish(workflow_data(sub_threads=keys))
            self._keys = keys

        try:
            await self._write_with_retry(write)
        except ConflictError:
            await sub.delete()
            raise
        self._handles[key] = sub
        return sub

    async def ensure_sub_thread(self, agent: object, key: str | None = None) -> ChatMessageThread:
        """The sub-thread under `key` (default: the agent's name), created if missing."""
        name = agent_name(agent)
        key = check_key(name if key is None else key)
        if key in self._handles:
            return self._handles[key]
        async with self._lock:
            if key in self._handles:
                return self._handles[key]
            return await self._create_sub_unlocked(name, key)

    async def get_sub_thread(self, key: str = MAIN) -> ChatMessageThread:
        """The sub-thread under `key` (default `"main"`).

        Raises:
            SubThreadNotFoundError: the workflow has no sub-thread with this key.
        """
        handle = self._handles.get(key)
        if handle is None:
            raise SubThreadNotFoundError(key, workflow_id=self.id, known=tuple(self._keys))
        return handle

    async def delete_sub_thread(self, key: str) -> None:
        """Remove the sub-thread under `key` from the workflow and delete it.

        Workflow checkpoints taken while it existed keep its key, but restoring them
        fails for that key once it is gone.

        Raises:
            SubThreadNotFoundError: the workflow has no sub-thread with this key.
        """
        handle = await self.get_sub_thread(key)

        async def write() -> None:
            keys = {k: v for k, v in self._keys.items() if k != key}
            await self.publish(workflow_data(sub_threads=keys))
            self._keys = keys

        async with self._lock:
            await self._write_with_retry(write)  # the map first: a crash leaves an orphan
            self._handles.pop(key, None)
        with suppress(ThreadNotFoundError):
            await handle.delete()

    async def adopt(self, record: Record, state: ImmutableState | None = None) -> None:
        old_ranges = self._log.ranges
        await super().adopt(record, state)
        shared = pieces.common_prefix(old_ranges, self._log.ranges)
        if shared == len(self._closed) == pieces.length(old_ranges):
            self._closed.extend(
                await read_records(
                    self._store, pieces.slice_ranges(self._log.ranges, shared, 1 << 62)
                )
            )
        else:
            self._closed = await read_records(self._store, self._log.ranges)
        for key in [k for k in self._handles if self._keys.get(k) != self._handles[k].id]:
            del self._handles[key]
        for key, thread_id in self._keys.items():
            if key not in self._handles:
                self._handles[key] = await self._load_sub(key, thread_id)

    async def refresh(self) -> None:
        """Re-read the workflow and every sub-thread from the store."""
        await super().refresh()
        for handle in list(self._handles.values()):
            await handle.refresh()

    # -- the run's lease (the runner's side) ---------------------------------------------

    @property
    def lease(self) -> Lease | None:
        """The run's lease as last read or written: its owner and expiry (None: not held).

        A runner holds it while the run is in progress; see `acquire_lease`.
        """
        return self._lease

    async def acquire_lease(
        self, *, duration: float = DEFAULT_LEASE_DURATION, wait: float = 0.0
    ) -> Lease:
        """Take the run's lease for this handle: from now on it alone runs the workflow.

        The lease (an owner id and an expiry `duration` seconds away) is written to the
        workflow record by compare-and-set, so of several runners trying at once exactly
        one gets it. Keep it with `renew_lease` (more often than `duration`), give it back
        with `release_lease`. While it is live, execution writes by any other handle raise
        `RunInProgressError`. A lease held by another runner is waited for up to `wait`
        seconds (polled in the store) until it is released or expires.

        Raises:
            RunInProgressError: another runner (or another task on this very handle)
                holds a live lease, still after `wait` seconds; nothing was written.
            ValueError: `duration` is not a positive number of seconds, or `wait` < 0.
        """
        duration = check_duration(duration)
        if not wait >= 0:
            raise ValueError(f"wait_for_lease must be 0 or more seconds, not {wait!r}")
        owner = new_owner()
        give_up = time.monotonic() + wait
        while True:
            async with self._lock:
                held, lease = self._leases.held, self._lease
                if held is not None and lease is not None and lease.owner == held.owner:
                    holder: Lease | None = lease  # another runner works through this handle
                else:
                    holder = await self._leases.take(owner, duration)
            if holder is None:
                assert self._lease is not None
                return self._lease
            left = give_up - time.monotonic()
            if left <= 0:
                raise self._leases.refused(holder)
            expiry = (holder.expires_at - now()).total_seconds()
            await anyio.sleep(min(_LEASE_POLL, left, max(expiry, 0.0) + 0.01))

    async def renew_lease(self) -> Lease:
        """Extend this handle's lease by its duration from now (a runner's timer calls it).

        Raises:
            LeaseLostError: it expired and another runner took the run over.
            RuntimeError: this handle holds no lease.
        """
        async with self._lock:
            return await self._leases.renew()

    async def check_lease(self) -> None:
        """Before a write outside the workflow record (a step's messages): is the lease ours?

        Costs nothing while the renewal timer keeps up; when the timer has fallen behind
        (the process was stalled), the lease is renewed first, which finds out whether
        another runner took the run over. A handle holding no lease passes.

        Raises:
            LeaseLostError: another runner took the run over.
        """
        if self._leases.held is None:
            return
        if self._leases.check_held().is_due():
            async with self._lock:
                await self._leases.confirm()

    async def release_lease(self) -> None:
        """Give this handle's lease back, so another runner may resume the run at once.

        Nothing is written when the handle holds none, or lost it to another runner.
        """
        async with self._lock:
            await self._leases.release()

    # -- execution (the runner's side) -------------------------------------------------

    async def update_execution(
        self,
        *,
        workflow: str | EllipsisType | None = _KEEP,
        status: RunStatus | EllipsisType = _KEEP,
        next: Sequence[StepTask] | EllipsisType = _KEEP,
        current: Sequence[StepRecord] | EllipsisType = _KEEP,
        waiting: Mapping[str, Mapping[str, JsonValue]] | EllipsisType = _KEEP,
        error: str | EllipsisType | None = _KEEP,
        checkpoint: str | EllipsisType | None = _KEEP,
    ) -> ExecutionState:
        """Store a change of the inline execution data (`...` leaves a field unchanged).

        Raises:
            ConflictError: another writer changed the execution state meanwhile (two
                runners on one workflow); reload the thread.
        """
        changes = {
            name: value
            for name, value in (
                ("workflow", workflow),
                ("status", status),
                ("next", next),
                ("current", current),
                ("waiting", waiting),
                ("error", error),
                ("checkpoint", checkpoint),
            )
            if value is not _KEEP
        }
        async with self._lock:
            await self._flush_unlocked()
            new = ExecutionData.model_validate({**dict(self._exec), **changes})
            await self._publish_execution(new)
        return self.execution

    async def record_step(self, record: StepRecord) -> None:
        """Store a change of one attempt of the current superstep (replaces it by id).

        Records arriving while a write is under way, or from steps made ready in the
        same pass of the event loop, are stored together by the next write (group
        commit), so a fan-out of many steps finishing at once costs few writes even
        when the store writes without yielding (SQLite's inline statements); each call
        returns once its record is stored.

        Raises:
            ValueError: the record is not of the superstep under way.
        """
        if record.superstep != self._exec.superstep:
            raise ValueError(
                f"step record {record.step!r} is of superstep {record.superstep}, but"
                f" workflow {self.id!r} is at superstep {self._exec.superstep}"
            )
        self._queue[record.id] = record
        self._queued += 1
        ticket = self._queued
        await anyio.lowlevel.checkpoint()  # the other ready steps queue theirs first
        async with self._lock:
            if self._flushed < ticket:
                await self._flush_unlocked()

    async def _flush_unlocked(self) -> None:
        if not self._queue:
            return
        batch, target = self._queue, self._queued
        self._queue = {}
        known = {r.id for r in self._exec.current}
        current = [batch.get(r.id, r) for r in self._exec.current]
        current.extend(r for r in batch.values() if r.id not in known)
        try:
            await self._publish_execution(self._exec.model_copy(update={"current": tuple(current)}))
        except BaseException:
            for record_id, record in batch.items():  # later records of the same id win
                self._queue.setdefault(record_id, record)
            raise
        self._flushed = target

    async def commit_superstep(
        self,
        *,
        state: Mapping[str, Any],
        next: Sequence[StepTask],
        waiting: Mapping[str, Mapping[str, JsonValue]],
        status: RunStatus = "running",
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> str:
        """End the superstep; returns the id of the workflow checkpoint it writes.

        Moves `current` to the history, stores the merged state and the next steps.

        Rows and the checkpoint are written before the workflow record points at them,
        so a crash in between leaves unreferenced data, never a torn workflow.
        """
        new_state = state if isinstance(state, ImmutableState) else ImmutableState(state)
        async with self._lock:
            await self._leases.guard()  # before the rows and the checkpoint, not just the record
            await self._save_unsaved()
            await self._flush_unlocked()
            records = self._exec.current
            step_log = await append_records(self._store, self._log, records, self._closed)
            digest = await self._state_digest(new_state)
            checkpoint_id = new_id()
            new = ExecutionData(
                workflow=self._exec.workflow,
                status=status,
                superstep=self._exec.superstep + 1,
                next=tuple(next),
                waiting={k: dict(v) for k, v in waiting.items()},
                checkpoint=checkpoint_id,
            )
            await self._cuts.write(
                checkpoint_id, new, step_log, digest, metadata=metadata, reason="auto"
            )
            await self._publish_execution(
                new,
                {
                    **workflow_data(step_log=step_log),
                    "state": digest,
                    "blobs": self.blob_refs(digest),
                },
            )
            self._log, self._state = step_log, new_state
            self._closed.extend(records)
        return checkpoint_id

    async def _state_digest(self, state: ImmutableState) -> str | None:
        if state == self._state:
            return self.state_digest
        return await self._store_state(state)

    async def _publish_execution(
        self, new: ExecutionData, extra: Mapping[str, JsonValue] | None = None
    ) -> None:
        """Publish `new` (and `extra` keys); retry only while the execution is unchanged.

        Only the lease holder writes while a lease is live: the lease is checked first,
        and again after each lost compare-and-set.

        Raises:
            LeaseLostError: this handle's lease was taken over by another runner.
            RunInProgressError: another runner holds a live lease.
            ConflictError: another writer changed the execution meanwhile.
        """
        base = self._exec
        await self._leases.guard()
        if self._exec != base:  # the guard re-read a stale handle
            raise self._changed_elsewhere()
        data = {**workflow_data(execution=new), **(extra or {})}
        backoff = self.retry_policy().start()
        while True:
            try:
                await self.publish(data)
                break
            except ConflictError:
                await self.reread_after_lost_write()
                if self._exec == new and all(
                    self._record.data.get(k) == v for k, v in data.items()
                ):
                    return  # our write had landed before a cancellation hid its answer
                self._leases.check_read()
                if self._exec != base:
                    raise self._changed_elsewhere() from None
                if not await backoff.wait():
                    raise backoff.exhausted(self.id, "its execution state was saved") from None
        self._exec = new

    def _changed_elsewhere(self) -> ConflictError:
        return ConflictError(
            f"workflow {self.id!r}",
            detail="its execution state was changed by another writer (is another"
            " runner resuming it?); reload the thread",
        )

    # -- whole-workflow checkpoints, time travel, rollback, forks ----------------------

    async def checkpoint(
        self, label: str | None = None, *, metadata: Mapping[str, Any] | None = None
    ) -> WorkflowCheckpoint:
        """Record the whole workflow in one workflow checkpoint record.

        It references a checkpoint of every sub-thread, and holds the step history, the
        execution state and the shared state.

        Costs O(number of sub-threads); a sub-thread unchanged since the previous
        workflow checkpoint reuses its checkpoint. Call `refresh()` first to include
        other handles' writes.

        Raises:
            InvalidIdError: the label is empty, over 128 characters or has control characters.
        """
        async with self._lock:
            await self._save_unsaved()
            await self._flush_unlocked()
            return await self._cuts.write(
                new_id(),
                self._exec,
                self._log,
                self.state_digest,
                label=label,
                metadata=metadata,
                reason="manual",
            )

    async def checkpoints(self) -> list[WorkflowCheckpoint]:
        """Every workflow checkpoint, oldest first (the runner's and rollbacks' included)."""
        return await list_cuts(self)

    async def get_checkpoint(self, id_or_label: str) -> WorkflowCheckpoint:
        """The workflow checkpoint with this id, else the newest one with this label.

        Raises:
            CheckpointNotFoundError: the workflow has no such checkpoint.
        """
        return (await find_cut(self, id_or_label)).checkpoint

    async def at(
        self, checkpoint: Checkpoint | str | None = None, *, message_id: str | None = None
    ) -> WorkflowSnapshot[Self]:
        """The whole workflow as it was at a checkpoint (or its id or label), read-only.

        The snapshot shows the execution state and shared state then, and each
        sub-thread at the same cut (`await snapshot.get_sub_thread(key)`).

        Raises:
            CheckpointNotFoundError: the workflow has no such checkpoint.
            TypeError: no checkpoint, or a `message_id` (a workflow has no messages of
                its own: travel a sub-thread with `get_sub_thread(key).at(...)`).
        """
        cut = await find_cut(self, _checkpoint_argument(checkpoint, message_id))
        return await travel.snapshot(self, cut)

    async def rollback(
        self, checkpoint: Checkpoint | str | None = None, *, message_id: str | None = None
    ) -> WorkflowCheckpoint:
        """Move the whole workflow back to a checkpoint; returns the old head's checkpoint.

        Every sub-thread is rolled back to its checkpoint of the cut (each keeps its
        own `"before-rollback"` checkpoint), and the step history, execution state and
        shared state return to the cut's. Nothing is deleted: the old head is first
        saved as a workflow checkpoint labelled `"before-rollback"`; rolling back to it
        restores everything. A run that was `running` at the cut comes back `idle`.

        Raises:
            CheckpointNotFoundError: the workflow has no such checkpoint.
            SubThreadNotFoundError: a sub-thread of the cut was deleted since.
        """
        cut = await find_cut(self, _checkpoint_argument(checkpoint, message_id))
        async with self._lock:
            await self._leases.guard()  # before any sub-thread is rolled back
            await self._flush_unlocked()
            saved = await self._cuts.write(
                new_id(),
                self._exec,
                self._log,
                self.state_digest,
                label=ROLLBACK_LABEL,
                metadata={"rolled_back_to": cut.checkpoint.id},
                reason="rollback",
            )
            restored = await travel.restore(self, cut)
            await self._publish_execution(restored.execution, restored.data)
            self._keys = {k: h.id for k, h in restored.sub_threads.items()}
            self._handles = dict(restored.sub_threads)
            self._log, self._closed = restored.step_log, restored.closed
            self._state = restored.state
            return saved

    async def fork(
        self,
        message_id: str | None = None,
        *,
        checkpoint: Checkpoint | str | None = None,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> Self:
        """A new workflow thread with status `idle`: from now, a checkpoint, or a message.

        Every sub-thread is forked and the step history is shared, so a fork costs
        O(number of sub-threads), whatever the length of the run. `await
        workflow.resume(fork)` continues it; steps completed before the cut never run
        again. Parent and fork never see each other's later changes. `reset_stats`
        applies to every forked sub-thread.

        - No argument: each sub-thread at its head, the execution as it is now.
        - `checkpoint=`: each sub-thread at its checkpoint of that workflow checkpoint.
        - `message_id`: the sub-thread holding that message is forked at it (so the
          fork's copy ends with it; `fork_point` is the message), and the rest of the
          workflow is taken from the workflow checkpoint that shows the moment that
          sub-thread reached the message: the earliest one at which it ended with the
          message (the end of the superstep whose step wrote it), else the latest one
          before the message was written (the superstep boundary before it: the step
          that was writing it runs again on resume, after it). A checkpoint where that
          sub-thread holds other messages, or where a step under way on it started
          below the message (a resume would roll the message back), does not count.
          Without such a checkpoint (a workflow run by hand), the rest is the workflow
          as it is now.

        Raises:
            MessageNotFoundError: no sub-thread holds `message_id` (naming the workflow).
            ValueError: several sub-threads hold `message_id` (fork one of them instead).
            CheckpointNotFoundError: the workflow has no such checkpoint.
            ConflictError: a thread with id `id` already exists.
            TypeError: both a message and a checkpoint are given.
        """
        if message_id is not None and checkpoint is not None:
            raise TypeError("a workflow forks at a checkpoint or at a message, not both")
        options = ForkOptions(id=id, title=title, tags=tags, reset_stats=reset_stats)
        if checkpoint is not None:
            forked = await travel.fork_cut(self, await find_cut(self, checkpoint), options)
            return self._bind_forked(forked)
        async with self._lock:
            await self._flush_unlocked()
            if message_id is None:
                forked = await travel.fork_head(self, options)
            else:
                forked = await travel.fork_at_message(self, message_id, options)
        return self._bind_forked(forked)

    def _bind_forked(self, forked: Forked) -> Self:
        handle = self._bind(self._store, forked.record, forked.state)
        return handle._attach(forked.closed, forked.sub_threads)

    # -- copies -------------------------------------------------------------------------

    def copy(self, *, id: str | None = None, reset_stats: bool = False) -> Self:
        """An in-memory copy of the whole workflow with a new identity, saved on its first write.

        Every sub-thread is copied too (as `ChatMessageThread.copy` does: a new id, the
        messages shared), and so is the execution state: the step history is shared
        (its records never change), the rest is this handle's, except that a `running`
        status reads `idle` (nothing runs the copy; `workflow.resume(copy)` continues
        it) and the copy has no checkpoints (they stay with the original). Writes to
        either never show in the other. `reset_stats` applies to every sub-thread too.

        The copy's first write (`update_execution`, `record_step`, `commit_superstep`,
        `checkpoint`, `create_sub_thread`, `update`, ...) stores it: first each sub-thread
        copy not stored yet (an empty one with a `"created"` checkpoint, as in a fork),
        then the workflow record. From then on `WorkflowThread.load(copy.id)` gives the
        same sub-thread messages and execution state. A sub-thread written to directly
        (`await copy.get_sub_thread(key)`) is stored by that write, like any copy.
        """
        twin = super().copy(id=id, reset_stats=reset_stats)
        twin._handles = {
            key: self._handles[key].copy(id=sub_id, reset_stats=reset_stats)
            for key, sub_id in twin._keys.items()
        }
        return twin

    def _data_for_copy(self, data: dict[str, JsonValue]) -> dict[str, JsonValue]:
        status: RunStatus = "idle" if self._exec.status == "running" else self._exec.status
        execution = self._exec.model_copy(update={"status": status, "checkpoint": None})
        data.pop(LEASE_KEY, None)  # nothing runs the copy
        data.update(
            workflow_data(
                sub_threads={key: new_id() for key in self._handles},  # the copies' ids
                execution=execution,
                step_log=self._log.shared(),  # the copy must not extend this log's segment
            )
        )
        return data

    def _share_into(self, twin: Self) -> None:
        twin._attach(list(self._closed), {})  # `copy` gives it its sub-thread copies

    async def publish(
        self,
        data: Mapping[str, JsonValue],
        *,
        tags: Mapping[str, str] | None = None,
        writes: Sequence[RowWrite] = (),
        typed: Mapping[str, object] | None = None,
    ) -> None:
        """`AgentThread.publish`; an unsaved copy stores its sub-thread copies first.

        Sub-threads before the workflow record: a crash in between leaves unreferenced
        sub-threads, never a workflow naming missing ones. A write of the lease key
        updates `lease`.
        """
        if self._record.version == 0:
            if await self._store.get_record(THREAD_KIND, self.id) is not None:
                raise thread_exists(self.id)  # before it stores sub-threads for nothing
            for handle in self._handles.values():
                if handle.version != 0:
                    continue  # stored already, by a write of its own
                if handle.head == 0:  # so a crashed step on it can be rolled back to empty
                    await handle.checkpoint(CREATED_LABEL)
                else:
                    await handle.update()  # its first write stores it
        await super().publish(data, tags=tags, writes=writes, typed=typed)
        if LEASE_KEY in data:
            lease = data[LEASE_KEY]
            self._lease = None if lease is None else Lease.model_validate(lease)

    async def _save_unsaved(self) -> None:
        """Store an unsaved copy before a write that changes other records first."""
        if self._record.version == 0:
            await self.publish({})

    async def delete(self) -> None:
        """Delete the workflow, its checkpoints, and every sub-thread it or they reference.

        Forks keep working (they have their own sub-threads). The workflow record goes
        first, so a crash leaves unreachable records, never a workflow with holes.

        Raises:
            ThreadNotFoundError: it was already deleted.
        """
        async with self._lock:
            if not await self._store.delete_record(THREAD_KIND, self.id):
                raise ThreadNotFoundError(self.id)
        thread_ids = set(self._keys.values())
        for cut in await list_cuts(self):
            thread_ids.update(place.thread_id for place in cut.sub_threads.values())
            await self._store.delete_record(WORKFLOW_CHECKPOINT_KIND, cut.id)
        for thread_id in sorted(thread_ids):
            with suppress(ThreadNotFoundError):
                sub = await ChatMessageThread.load(thread_id, store=self._store, lazy=True)
                await sub.delete()

    # -- JSON export ------------------------------------------------------------------

    def _export_content(self) -> dict[str, Any]:
        return export_content(self)

    async def export(self) -> str:
        """The workflow as `to_json()` shows it, each sub-thread re-read from the store first.

        Workflow checkpoints are not exported (their sub-thread checkpoints are, with
        their ids); a run imported with `from_json` resumes where it stood.
        """
        async with self._lock:
            document = self._export_document()
            for key, handle in self._handles.items():
                document["sub_threads"][key] = json.loads(await handle.export())
        return json.dumps(document, ensure_ascii=False, indent=1)

    @classmethod
    async def _import(cls, document: dict[str, Any], store: ThreadStore) -> Self:
        execution, records, subs = await import_parts(document, store)
        step_log = await append_records(store, StepLog(), records, [])
        state = ImmutableState(document.get("state") or {})
        digest = await store.put_blob(state.to_json_bytes()) if state else None
        record = cls.new_record(
            thread_id=document.get("id"),
            title=document.get("title"),
            tags=document.get("tags"),
            metadata=document.get("metadata"),
            parent_id=document.get("parent_id"),
            fork_point=document.get("fork_point"),
            state_digest=digest,
            extra=workflow_data(
                sub_threads={k: s.id for k, s in subs.items()},
                execution=execution,
                step_log=step_log,
            ),
        )
        try:
            stored = await put_new(store, record)
        except ConflictError:
            for sub in subs.values():
                await sub.delete()
            raise
        return cls._bind(store, stored, state)._attach(records, subs)


def _checkpoint_argument(
    checkpoint: Checkpoint | str | None, message_id: str | None
) -> Checkpoint | str:
    if message_id is not None or checkpoint is None:
        raise TypeError(
            "a workflow is travelled by checkpoint (its id or label); it has no messages of"
            " its own: use `(await wt.get_sub_thread(key)).at(message_id=...)` for one"
        )
    return checkpoint


__all__ = ["MAIN", "WorkflowThread"]
