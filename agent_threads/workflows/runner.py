"""The runner: executes a workflow in supersteps on anyio task groups, resumably.

A superstep starts every ready step at once, each on its agent's sub-thread. Each
attempt is stored as `running` before the step is called and as `completed`, `failed`
or `interrupted` the moment it ends. When every step of the superstep has completed,
their state patches are merged (the fan-in's policy), the next steps are routed, and
`commit_superstep` writes a workflow checkpoint. Whatever stops the process, the stored
records say what is done, so `resume` runs only what is left.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio

from agent_threads.state import ImmutableState
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionState, StepRecord, StepTask
from agent_threads.threads.workflow.thread import WorkflowThread
from agent_threads.workflows.context import StepContext, StepInterrupt, StepResult

if TYPE_CHECKING:
    from agent_threads.workflows.graph import Step, Workflow

StepObserver = Callable[[StepRecord], Awaitable[None] | None]
"""Called with each step record as it changes (for progress displays)."""

CRASHED = "the run stopped while the step was running (crash or cancellation)"
"""The error recorded for an attempt found `running` when a run resumes."""

_PARK_SECONDS = 5.0


async def start_run(
    workflow: Workflow,
    input: Any,
    *,
    store: ThreadStore | None,
    id: str | None,
    title: str | None,
    tags: Sequence[str] | None,
    on_step: StepObserver | None,
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
    start = await thread.checkpoint(metadata={"superstep": 0, "reason": "start"})
    return await _Runner(workflow, thread, on_step).run({}, checkpoint=start.id)


async def resume_run(
    workflow: Workflow,
    thread: WorkflowThread | str,
    *,
    store: ThreadStore | None,
    reply: Any,
    replies: Mapping[str, Any] | None,
    on_step: StepObserver | None,
) -> WorkflowThread:
    """Continue a run of `workflow` stored in `thread` (a handle, or an id in `store`)."""
    workflow.validate()
    if isinstance(thread, str):
        if store is None:
            raise TypeError("resume by thread id needs store=...")
        thread = await WorkflowThread.load(thread, store=store)
    execution = thread.execution
    if execution.workflow not in (None, workflow.name):
        raise ValueError(
            f"thread {thread.id!r} runs workflow {execution.workflow!r}, not {workflow.name!r}"
        )
    answers = _replies(execution, reply, replies)
    return await _Runner(workflow, thread, on_step).run(answers)


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
    """One process's drive of one workflow thread."""

    def __init__(
        self, workflow: Workflow, thread: WorkflowThread, on_step: StepObserver | None
    ) -> None:
        self.workflow = workflow
        self.thread = thread
        self.on_step = on_step

    async def run(
        self, answers: Mapping[str, Any], *, checkpoint: str | None = None
    ) -> WorkflowThread:
        try:
            if self.thread.execution.status != "completed":
                await self._recover(answers, checkpoint)
                while await self._superstep():
                    pass
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._park()
            raise
        return self.thread

    async def _park(self) -> None:
        """Best effort: say the run is paused. Either way it stays resumable."""
        with anyio.move_on_after(_PARK_SECONDS), suppress(Exception):
            await self.thread.update_execution(status="paused")

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
            branch = await rewind(sub, record.thread_head)
            finished = record.failed(f"{type(exc).__name__}: {exc}", branch=branch)
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
            return False
        if any(r.status == "interrupted" for r in latest):
            await self.thread.update_execution(status="paused")
            return False
        try:
            state = self._merge(latest, execution.state)
            tasks, waiting = self.workflow.route(latest, state, execution.waiting)
        except Exception as exc:
            error = f"ending superstep {execution.superstep} failed: {type(exc).__name__}: {exc}"
            await self.thread.update_execution(status="failed", error=error)
            return False
        await self.thread.commit_superstep(
            state=state,
            next=tasks,
            waiting=waiting,
            metadata={"superstep": execution.superstep + 1, "steps": [r.step for r in latest]},
        )
        return True

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


def latest_attempts(records: Sequence[StepRecord]) -> list[StepRecord]:
    """The last attempt of each step among `records`, in the order steps first appear."""
    latest: dict[str, StepRecord] = {}
    for record in records:
        latest[record.step] = record
    return list(latest.values())
