"""One owner per run: the lease a run holds in its workflow record, seen from one process.

Across processes (a SIGKILLed owner, a stalled one, racing resumes): test_processes.py.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from agent_threads import (
    MemoryStore,
    Message,
    RunInProgressError,
    WorkflowThread,
)
from agent_threads.workflows import StepContext, Workflow, step

LEASE = 1.0
"""Seconds of the leases these tests let expire (the default, 30 s, elsewhere)."""


class Gated:
    """A workflow `first -> second` whose `first` waits for `release` once it started."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.started, self.release = anyio.Event(), anyio.Event()

        @step
        async def first(ctx: StepContext) -> str:
            self.calls[ctx.step] += 1
            await ctx.emit(Message.assistant("first, before the gate"))
            self.started.set()
            await self.release.wait()
            await ctx.emit(Message.assistant("first, after the gate"))
            return "one"

        @step
        async def second(ctx: StepContext) -> str:
            self.calls[ctx.step] += 1
            await ctx.emit(Message.assistant("second"))
            return "two"

        self.workflow = Workflow("gated").edge(first, second)


async def idle_run(store: MemoryStore, workflow: Workflow, thread_id: str) -> WorkflowThread:
    """A stored run that has not started (as a crash right after its creation leaves it)."""
    tasks = workflow.start_tasks("go")
    return await WorkflowThread.create(store, id=thread_id, workflow=workflow.name, next=tasks)


async def test_two_resumes_at_once_run_the_steps_once_and_refuse_the_other() -> None:
    store, gated = MemoryStore(), Gated()
    await idle_run(store, gated.workflow, "run-1")
    refused: list[RunInProgressError] = []
    done: list[WorkflowThread] = []

    async def resume() -> None:
        try:
            done.append(await gated.workflow.resume("run-1", store=store))
        except RunInProgressError as exc:
            refused.append(exc)
            gated.release.set()  # the winner waits in its first step until then

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(resume)
            group.start_soon(resume)
    assert len(refused) == 1 and len(done) == 1
    assert gated.calls == {"first": 1, "second": 1}
    (run,) = done
    assert run.execution.status == "completed" and run.lease is None
    assert [m.text for m in (await run.get_sub_thread("first")).messages] == [
        "first, before the gate",
        "first, after the gate",
    ]


async def test_a_refused_runner_learns_the_run_the_owner_and_the_expiry_at_once() -> None:
    store, gated = MemoryStore(), Gated()
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: gated.workflow.run("go", store=store, id="run-1"))
        await gated.started.wait()
        owner = (await WorkflowThread.load("run-1", store=store)).lease
        with anyio.fail_after(1), pytest.raises(RunInProgressError) as info:
            await gated.workflow.resume("run-1", store=store)
        gated.release.set()
    error = info.value
    assert owner is not None
    assert (error.workflow_id, error.owner, error.expires_at) == (
        "run-1",
        owner.owner,
        owner.expires_at,
    )
    assert "'run-1'" in str(error) and owner.owner in str(error)
    assert error.expires_at - datetime.now(UTC) < timedelta(seconds=30)
    assert gated.calls == {"first": 1, "second": 1}


async def test_a_resume_passing_the_same_handle_twice_is_refused_too() -> None:
    store, gated = MemoryStore(), Gated()
    run = await idle_run(store, gated.workflow, "run-1")
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: gated.workflow.resume(run))
        await gated.started.wait()
        with pytest.raises(RunInProgressError):
            await gated.workflow.resume(run)
        gated.release.set()
    assert run.execution.status == "completed" and gated.calls == {"first": 1, "second": 1}


async def test_wait_for_lease_waits_until_the_owner_releases_it() -> None:
    store, gated = MemoryStore(), Gated()
    await idle_run(store, gated.workflow, "run-1")
    waited: list[WorkflowThread] = []

    async def wait_then_resume() -> None:
        waited.append(await gated.workflow.resume("run-1", store=store, wait_for_lease=10))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: gated.workflow.resume("run-1", store=store))
            await gated.started.wait()
            group.start_soon(wait_then_resume)
            await anyio.wait_all_tasks_blocked()  # the second one polls the lease
            gated.release.set()
    assert waited[0].execution.status == "completed"
    assert gated.calls == {"first": 1, "second": 1}  # it found the run completed


async def test_wait_for_lease_takes_over_a_dead_owners_run_once_its_lease_expires() -> None:
    store, gated = MemoryStore(), Gated()
    gated.release.set()
    dead = await idle_run(store, gated.workflow, "run-1")
    lease = await dead.acquire_lease(duration=LEASE)  # and never renewed: its owner died
    with pytest.raises(RunInProgressError):
        await gated.workflow.resume("run-1", store=store)
    assert not gated.calls
    with anyio.fail_after(LEASE + 5):
        run = await gated.workflow.resume("run-1", store=store, wait_for_lease=LEASE + 5)
    assert datetime.now(UTC) >= lease.expires_at
    assert run.execution.status == "completed" and gated.calls == {"first": 1, "second": 1}


async def test_a_run_longer_than_its_lease_keeps_it_by_renewing() -> None:
    store, gated = MemoryStore(), Gated()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: gated.workflow.run("go", store=store, id="run-1", lease_duration=0.3)
        )
        await gated.started.wait()
        first = (await WorkflowThread.load("run-1", store=store)).lease
        await anyio.sleep(0.9)  # three lease durations: alive only if renewed
        with pytest.raises(RunInProgressError) as info:
            await gated.workflow.resume("run-1", store=store)
        gated.release.set()
    assert first is not None and info.value.owner == first.owner
    assert info.value.expires_at > first.expires_at
    assert gated.calls == {"first": 1, "second": 1}


async def test_the_lease_is_renewed_on_a_timer_not_by_each_step() -> None:
    seen: list[datetime] = []

    async def look(ctx: StepContext) -> int:
        assert ctx.workflow.lease is not None
        seen.append(ctx.workflow.lease.expires_at)
        return int(ctx.input or 0) + 1

    steps = [step(name=f"s{i}")(look) for i in range(20)]
    workflow = Workflow("chain")
    for a, b in itertools.pairwise(steps):
        workflow.edge(a, b)
    run = await workflow.run(0)
    assert len(seen) == 20 and len(set(seen)) == 1  # twenty supersteps, one lease write
    assert run.lease is None


async def test_a_paused_run_gives_its_lease_back_for_the_reply() -> None:
    store = MemoryStore()

    @step
    async def ask(ctx: StepContext) -> object:
        return await ctx.interrupt("go on?")

    workflow = Workflow("ask").add(ask)
    run = await workflow.run(store=store)
    assert run.execution.status == "paused" and run.lease is None
    run = await workflow.resume(run.id, store=store, reply="yes")
    assert run.execution.status == "completed" and run.lease is None


async def test_a_cancelled_run_is_paused_and_gives_its_lease_back() -> None:
    store, gated = MemoryStore(), Gated()
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: gated.workflow.run("go", store=store, id="run-1"))
            await gated.started.wait()
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught
    run = await WorkflowThread.load("run-1", store=store)
    assert run.execution.status == "paused" and run.lease is None
    gated.release.set()
    run = await gated.workflow.resume(run)  # at once: no lease to wait for
    assert run.execution.status == "completed" and gated.calls == {"first": 2, "second": 1}


def test_a_lease_duration_must_be_a_positive_number_of_seconds() -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        Workflow("w", lease_duration=0)
    with pytest.raises(ValueError, match="lease_duration"):
        Workflow("w", lease_duration=float("nan"))


def test_leases_work_under_trio() -> None:
    async def main() -> None:
        store, gated = MemoryStore(), Gated()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: gated.workflow.run("go", store=store, id="run-1"))
            await gated.started.wait()
            with pytest.raises(RunInProgressError):
                await gated.workflow.resume("run-1", store=store)
            gated.release.set()
        assert gated.calls == {"first": 1, "second": 1}

    anyio.run(main, backend="trio")
