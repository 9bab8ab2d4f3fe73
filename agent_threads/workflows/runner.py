"""The runner: executes a workflow in supersteps on anyio task groups, resumably.

A superstep starts every ready step at once, each on its agent's sub-thread. Each
attempt is stored as `running` before the step is called and as `completed`, `failed`
or `interrupted` the moment it ends. When every step of the superstep has completed,
their state patches are merged (the fan-in's policy), the next steps are routed, and
`commit_superstep` writes a workflow checkpoint. Whatever stops the process, the stored
records say what is done, so `resume` runs only what is left.

One runner at a time: a run takes its thread's lease before anything else (a second
runner meets `RunInProgressError` and runs nothing), a task beside the supersteps renews
it every third of its duration (no write per step), and it is given back when the run
completes, pauses, fails or is cancelled. Errors reach the caller one at a time, never
as an exception group: a failed run raises `StepFailedError` (or `WorkflowFailedError`
when ending a superstep failed) after storing its status and error.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio

from agent_threads.errors import StepFailedError, WorkflowFailedError
from agent_threads.state import ImmutableState
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionState, StepRecord, StepTask
from agent_threads.threads.workflow.lease import RENEW_EVERY
from agent_threads.threads.workflow.thread import WorkflowThread
from agent_threads.workflows.context import StepContext, StepInterrupt, StepResult

if TYPE_CHECKING:
    from agent_threads.workflows.graph import Step, Workflow

StepObserver = Callable[[StepRecord], Awaitable[None] | None]
"""Called with each step record as it changes (for progress displays)."""

CRASHED = "the run stopped while the step was running (crash or cancellation)"
"""The error recorded for an attempt found `running` when a run resumes."""

_PARK_SECONDS = 5.0

_Plan = Callable[[], Awaitable[tuple[Mapping[str, Any], str | None]]]
"""Called once the lease is held: the replies by step, and the checkpoint to start from."""


async def start_run(
    workflow: Workflow,
    input: Any,
    *,
    store: ThreadStore | None,
    id: str | None,
    title: str | None,
    tags: Mapping[str, str] | None,
    on_step: StepObserver | None,
    lease_duration: float,
) -> WorkflowThread:
    """Create a workflow thread for a new run of `workflow` and run it."""
    workflow.validate()
    tasks = workflow.start_tasks(input)
    thread = await WorkflowThread.create(
        store,
        id=id,
        title=workflow.name if title is None else title,
        tags=tags,
        metadata={"workflow": workflow.name},
        workflow=workflow.name,
        next=tasks,
    )  # one write holds the start: a run stopped from here on resumes from it

    async def plan() -> tuple[Mapping[str, Any], str | None]:
        start = await thread.checkpoint(metadata={"superstep": 0, "reason": "start"})
        return {}, start.id

    return await _Runner(workflow, thread, on_step, lease_duration).run(plan)


async def resume_run(
    workflow: Workflow,
    thread: WorkflowThread | str,
    *,
    store: ThreadStore | None,
    reply: Any,
    replies: Mapping[str, Any] | None,
    on_step: StepObserver | None,
    lease_duration: float,
    wait_for_lease: float,
) -> WorkflowThread:
    """Continue a run of `workflow` stored in `thread` (a handle, or an id in `store`)."""
    workflow.validate()
    if isinstance(thread, str):
        if store is None:
            raise TypeError("resume by thread id needs store=...")
        thread = await WorkflowThread.load(thread, store=store)
    run = thread

    async def plan() -> tuple[Mapping[str, Any], str | None]:
        _check_workflow(run, workflow)  # again: taking the lease may have re-read the thread
        return _replies(run.execution, reply, replies), None

    _check_workflow(run, workflow)
    _replies(run.execution, reply, replies)  # a wrong reply is refused before any write
    if run.execution.status == "completed":
        return run  # nothing left to run: no lease taken, nothing written
    runner = _Runner(workflow, run, on_step, lease_duration)
    return await runner.run(plan, wait_for_lease=wait_for_lease)


def _check_workflow(thread: WorkflowThread, workflow: Workflow) -> None:
    name = thread.execution.workflow
    if name not in (None, workflow.name):
        raise ValueError(f"thread {thread.id!r} runs workflow {name!r}, not {workflow.name!r}")


def _replies(
    execution: ExecutionState, reply: Any, replies: Mapping[str, Any] | None
) -> dict[str, Any]:
    waiting = [r.step for r in execution.interrupts]
    answers = dict(replies or {})
    unknown = sorted(set(answers) - set(waiting))
    if unknown:
        raise ValueError(f"replies for steps {unknown} that do not wait (waiting: {waiting})")
    if reply is not None:
        if len(waiting) != 1:
            raise ValueError(
                f"reply= answers the one step waiting at an interrupt, but {len(waiting)} wait"
                f" ({waiting}); pass replies={{step: reply}}"
            )
        answers[waiting[0]] = reply
    return answers


class _Runner:
    """One process's drive of one workflow thread, under the thread's lease."""

    def __init__(
        self,
        workflow: Workflow,
        thread: WorkflowThread,
        on_step: StepObserver | None,
        lease_duration: float,
    ) -> None:
        self.workflow = workflow
        self.thread = thread
        self.on_step = on_step
        self.lease_duration = lease_duration
        self._errors: dict[str, Exception] = {}  # failed attempt's record id -> its exception

    async def run(self, plan: _Plan, *, wait_for_lease: float = 0.0) -> WorkflowThread:
        """Take the lease, run what is left, and give the lease back.

        Raises:
            RunInProgressError: another runner holds the lease (after `wait_for_lease`).
            StepFailedError, WorkflowFailedError: the run failed (stored as failed).
            LeaseLostError: another runner took the run over while this one was stalled.
        """
        await self.thread.acquire_lease(duration=self.lease_duration, wait=wait_for_lease)
        try:
            answers, checkpoint = await plan()
            if self.thread.execution.status != "completed":
                await self._drive(answers, checkpoint)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._park()
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()
        return self.thread

    async def _drive(self, answers: Mapping[str, Any], checkpoint: str | None) -> None:
        """Run the supersteps while a task beside them renews the lease.

        Whatever stops them leaves the task group as an exception group; the caller
        gets its first error (the others as notes). Cancellation passes through as is.
        """
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._keep_lease)
                await self._recover(answers, checkpoint)
                while await self._superstep():
                    pass
                tasks.cancel_scope.cancel()
        except* Exception as group:
            error = _first_error(group)
            raise error from error.__cause__

    async def _keep_lease(self) -> None:
        """Renew the lease every third of its duration: a write per period, not per step."""
        while True:
            await anyio.sleep(self.lease_duration * RENEW_EVERY)
            await self.thread.renew_lease()  # LeaseLostError stops the run

    async def _park(self) -> None:
        """Best effort: say the run is paused. Either way it stays resumable."""
        with anyio.move_on_after(_PARK_SECONDS), suppress(Exception):
            await self.thread.update_execution(status="paused")

    async def _release(self) -> None:
        """Best effort: give the lease back. Else it expires after its duration."""
        with anyio.move_on_after(_PARK_SECONDS), suppress(Exception):
            await self.thread.release_lease()

    # -- recovery -------------------------------------------------------------------

    async def _recover(self, answers: Mapping[str, Any], checkpoint: str | None) -> None:
        """Roll back unfinished attempts and queue new ones; mark the run running."""
        current = list(self.thread.execution.current)
        for record in latest_attempts(current):
            if record.status == "completed":
                continue
            sub = await self.thread.ensure_sub_thread(record.agent, record.key)
            branch = await rewind(sub, record.thread_head)
            if record.status == "pending":
                continue  # never started: nothing else to undo
            if record.status == "running":
                current[current.index(record)] = record.failed(CRASHED, branch=branch)
            replies = record.replies
            if record.step in answers:
                replies = (*replies, answers[record.step])
            current.append(record.retry(thread_head=record.thread_head, replies=replies))
        await self.thread.update_execution(
            workflow=self.workflow.name,
            status="running",
            current=current,
            error=None,
            checkpoint=self.thread.execution.checkpoint if checkpoint is None else checkpoint,
        )

    # -- supersteps -----------------------------------------------------------------

    async def _superstep(self) -> bool:
        """Run one superstep; False when the run completed, paused or failed."""
        execution = self.thread.execution
        if not execution.current:
            if not execution.next:
                await self.thread.update_execution(status="completed")
                return False
            await self._begin(execution.next, execution.superstep)
        ready = [
            r
            for r in latest_attempts(self.thread.execution.current)
            if r.status in ("pending", "running")  # running: stored so by _begin just now
        ]
        steps = [self.workflow.get_step(r.step) for r in ready]  # unknown steps fail here
        async with anyio.create_task_group() as group:
            for step, record in zip(steps, ready, strict=True):
                group.start_soon(self._attempts, step, record)
        return await self._settle()

    async def _begin(self, tasks: Sequence[StepTask], superstep: int) -> None:
        records: list[StepRecord] = []
        owners: dict[str, str] = {}
        for task in tasks:
            step = self.workflow.get_step(task.step)
            if step.key in owners:
                raise ValueError(
                    f"steps {owners[step.key]!r} and {step.name!r} would both write sub-thread"
                    f" {step.key!r} in superstep {superstep}; give them different agents or keys"
                )
            owners[step.key] = step.name
            sub = await self.thread.ensure_sub_thread(step.agent, step.key)
            records.append(
                StepRecord(
                    step=step.name,
                    agent=step.agent,
                    key=step.key,
                    superstep=superstep,
                    input=task.input,
                    thread_head=sub.head,
                ).running()
            )
        await self.thread.update_execution(current=records, next=())  # they start right away

    async def _attempts(self, step: Step, record: StepRecord) -> None:
        """Run a step until it completes, is interrupted, or has used its attempts."""
        for _ in range(step.max_attempts - 1):
            record = await self._attempt(step, record)
            if record.status != "failed":
                return
            record = record.retry(thread_head=record.thread_head)
        await self._attempt(step, record)

    async def _attempt(self, step: Step, record: StepRecord) -> StepRecord:
        if record.status == "pending":  # a retry or a re-run: store that it starts
            record = record.running()
            await self._store(record)
        else:
            await self._notify(record)
        sub = await self.thread.get_sub_thread(record.key)
        context = StepContext(self.thread, sub, self.thread.state, record.input, record)
        try:
            finished = await _call(step, context)
        except Exception as exc:
            await self.thread.check_lease()  # a runner that lost the run rolls nothing back
            branch = await rewind(sub, record.thread_head)
            finished = record.failed(f"{type(exc).__name__}: {exc}", branch=branch)
            self._errors[finished.id] = exc
        await self._store(finished)
        return finished

    async def _store(self, record: StepRecord) -> None:
        await self.thread.record_step(record)
        await self._notify(record)

    async def _notify(self, record: StepRecord) -> None:
        if self.on_step is not None:
            result = self.on_step(record)
            if inspect.isawaitable(result):
                await result

    async def _settle(self) -> bool:
        """End the superstep if every step completed; else stop as failed or paused."""
        execution = self.thread.execution
        latest = latest_attempts(execution.current)
        failed = [r for r in latest if r.status == "failed"]
        if failed:
            error = "; ".join(f"step {r.step!r} failed: {r.error}" for r in failed)
            await self.thread.update_execution(status="failed", error=error)
            raise self._step_failed(failed)
        if any(r.status == "interrupted" for r in latest):
            await self.thread.update_execution(status="paused")
            return False
        try:
            state = self._merge(latest, execution.state)
            tasks, waiting = self.workflow.route(latest, state, execution.waiting)
        except Exception as exc:
            error = f"ending superstep {execution.superstep} failed: {type(exc).__name__}: {exc}"
            await self.thread.update_execution(status="failed", error=error)
            raise WorkflowFailedError(
                self.thread.id, workflow=self.workflow.name, error=error, run=self.thread
            ) from exc
        await self.thread.commit_superstep(
            state=state,
            next=tasks,
            waiting=waiting,
            metadata={"superstep": execution.superstep + 1, "steps": [r.step for r in latest]},
        )
        return True

    def _step_failed(self, failed: Sequence[StepRecord]) -> StepFailedError:
        """The error for the first failed step (the others in notes), its exception the cause."""
        first = failed[0]
        error = StepFailedError(
            first.step,
            attempt=first.attempt,
            workflow_id=self.thread.id,
            workflow=self.workflow.name,
            error=first.error or "",
            run=self.thread,
        )
        for other in failed[1:]:
            error.add_note(
                f"step {other.step!r} failed too, on attempt {other.attempt}: {other.error}"
            )
        error.__cause__ = self._errors.get(first.id)
        return error

    def _merge(self, records: Sequence[StepRecord], base: ImmutableState) -> ImmutableState:
        """Merge the steps' patches, three-way from the superstep's state, in step order."""
        patched = [r for r in records if r.patch]
        policy = self.workflow.merge_policy([r.step for r in patched])
        merged = base
        for record in patched:
            assert record.patch is not None
            merged = merged.merge(base.apply(record.patch), policy=policy, base=base)
        return merged


async def _call(step: Step, context: StepContext) -> StepRecord:
    """Call the step; its completed or interrupted record (its exceptions propagate)."""
    record = context.record
    try:
        result = await step(context)
    except StepInterrupt as signal:
        return record.interrupted(signal.prompt)
    if isinstance(result, StepResult):
        return record.completed(result.output, result.patch)
    return record.completed(result, None)


async def rewind(sub: ChatMessageThread, head: int) -> str | None:
    """Roll `sub` back to its first `head` messages.

    Returns the id of the checkpoint that keeps the messages rolled back, or None when
    there were none.
    """
    if sub.head <= head:
        return None
    if head > 0:
        last = (await sub.get_messages(head - 1, head))[0]
        return (await sub.rollback(message_id=last.id)).id
    for checkpoint in await sub.checkpoints():
        if checkpoint.message_count == 0:
            return (await sub.rollback(checkpoint)).id
    raise RuntimeError(
        f"sub-thread {sub.id!r} has no checkpoint of its empty start to roll back to"
    )


def _first_error(group: BaseExceptionGroup[Exception]) -> Exception:
    """The first exception of a group, nested groups flattened; the others become notes."""
    leaves: list[Exception] = []
    pending: list[BaseException] = [group]
    while pending:
        item = pending.pop(0)
        if isinstance(item, BaseExceptionGroup):
            pending[:0] = item.exceptions
        elif isinstance(item, Exception):
            leaves.append(item)
    first = leaves[0]
    for other in leaves[1:]:
        first.add_note(f"also raised meanwhile: {type(other).__name__}: {other}")
    return first


def latest_attempts(records: Sequence[StepRecord]) -> list[StepRecord]:
    """The last attempt of each step among `records`, in the order steps first appear."""
    latest: dict[str, StepRecord] = {}
    for record in records:
        latest[record.step] = record
    return list(latest.values())
