"""The run lease of a WorkflowThread: taken by compare-and-set, checked by every execution write."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_threads import (
    LeaseLostError,
    MemoryStore,
    Message,
    RunInProgressError,
    StepRecord,
    ThreadStore,
    WorkflowThread,
)
from tests.stores.conftest import STORES

SHORT = 0.3
"""Seconds of a lease these tests let expire."""


def record(step: str, superstep: int = 0, **fields: Any) -> StepRecord:
    return StepRecord(step=step, agent=step, key=step, superstep=superstep, **fields)


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    async with request.param(tmp_path) as opened:
        yield opened


async def two_handles(store: ThreadStore | None = None) -> tuple[WorkflowThread, WorkflowThread]:
    store = MemoryStore() if store is None else store
    first = await WorkflowThread.create(store, id="run-1", workflow="w")
    await (await first.get_sub_thread()).on_new_messages([Message.user("task")])
    await first.checkpoint("start")
    return first, await WorkflowThread.load("run-1", store=store)


async def test_of_two_handles_taking_the_lease_one_wins_and_the_other_writes_nothing() -> None:
    first, second = await two_handles()
    lease = await first.acquire_lease()
    version = first.version
    with pytest.raises(RunInProgressError) as info:
        await second.acquire_lease()
    assert info.value.owner == lease.owner and info.value.expires_at == lease.expires_at
    assert second.lease == lease and second.version == version  # re-read, not written


async def test_only_the_holder_writes_the_execution_while_the_lease_is_live() -> None:
    holder, other = await two_handles()
    await holder.acquire_lease()
    await holder.update_execution(status="running", current=[record("a", status="running")])
    messages = [m.id for m in (await other.get_sub_thread()).messages]
    with pytest.raises(RunInProgressError):
        await other.update_execution(status="paused")
    with pytest.raises(RunInProgressError):
        await other.rollback("start")
    assert [m.id for m in (await holder.get_sub_thread()).messages] == messages
    await holder.record_step(record("a", status="completed"))
    await holder.release_lease()
    await other.refresh()
    await other.update_execution(status="paused")  # released: anyone may write again


async def test_a_holder_whose_lease_was_taken_over_writes_nothing_more() -> None:
    stalled, successor = await two_handles()
    await stalled.acquire_lease(duration=SHORT)
    await stalled.update_execution(status="running", current=[record("a", status="running")])
    with anyio.fail_after(5):  # the stalled holder never renews: its lease expires
        taken = await successor.acquire_lease(wait=5)
    await successor.update_execution(current=[record("a", status="failed")])
    version, checkpoints = successor.version, len(await successor.checkpoints())
    with pytest.raises(LeaseLostError) as info:
        await stalled.record_step(record("a", status="completed"))
    assert info.value.holder == taken.owner and info.value.workflow_id == "run-1"
    for write in (
        lambda: stalled.update_execution(status="paused"),
        lambda: stalled.commit_superstep(state={}, next=(), waiting={}),
        stalled.renew_lease,
        stalled.check_lease,
    ):
        with pytest.raises(LeaseLostError):
            await write()
    await stalled.release_lease()  # not ours: nothing written
    stored = await WorkflowThread.load("run-1", store=successor.store)
    assert stored.version == version and stored.lease == taken
    assert len(await stored.checkpoints()) == checkpoints
    assert [(r.step, r.status) for r in stored.execution.current] == [("a", "failed")]


async def test_a_handle_that_saw_a_released_lease_rereads_instead_of_refusing() -> None:
    runner, stale = await two_handles()
    await runner.acquire_lease()
    await stale.refresh()  # it sees the lease held
    await runner.release_lease()
    await stale.update_execution(status="paused")
    assert stale.lease is None


async def test_renewing_moves_the_expiry_and_keeps_the_owner() -> None:
    run, _ = await two_handles()
    first = await run.acquire_lease(duration=SHORT)
    await anyio.sleep(0.01)
    renewed = await run.renew_lease()
    assert renewed.owner == first.owner and renewed.expires_at > first.expires_at


async def test_copies_forks_checkpoints_and_exports_never_carry_the_lease() -> None:
    run, _ = await two_handles()
    await run.acquire_lease()
    copy = run.copy()
    assert copy.lease is None
    await copy.update_execution(status="paused")  # the copy is its own run
    assert (await run.fork()).lease is None
    assert (await run.fork(checkpoint="start")).lease is None
    assert "lease" not in json.loads(run.to_json())
    cut = await run.checkpoint("held")
    stored = await run.store.get_record("workflow_checkpoint", cut.id)
    assert stored is not None and "lease" not in json.dumps(stored.data)


async def test_a_lease_taken_by_an_unsaved_copy_stores_the_copy() -> None:
    run, _ = await two_handles()
    copy = run.copy(id="copy-1")
    lease = await copy.acquire_lease()
    stored = await WorkflowThread.load("copy-1", store=run.store)
    assert stored.lease == lease


async def test_the_lease_is_kept_taken_over_and_refused_alike_on_every_store(
    store: ThreadStore,
) -> None:
    stalled, successor = await two_handles(store)
    lease = await stalled.acquire_lease(duration=SHORT)
    assert (await WorkflowThread.load("run-1", store=store)).lease == lease
    with pytest.raises(RunInProgressError):
        await successor.update_execution(status="paused")
    with anyio.fail_after(5):
        taken = await successor.acquire_lease(wait=5)
    await successor.update_execution(status="running")
    with pytest.raises(LeaseLostError):
        await stalled.update_execution(status="paused")
    await successor.release_lease()
    stored = await WorkflowThread.load("run-1", store=store)
    assert stored.lease is None and stored.execution.status == "running"
    assert taken.owner != lease.owner
