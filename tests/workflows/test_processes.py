"""Workflows across processes: SIGKILL at random points, one owner per run, a pause resumed.

Children run `tests/workflows/_crash_worker.py` on an SQLite file; the test process
resumes what they leave and checks it against the side-effect log the steps wrote.
"""

from __future__ import annotations

import json
import random
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from agent_threads import RunInProgressError, SQLiteStore, ThreadNotFoundError, WorkflowThread
from agent_threads.workflows import CRASHED

from ._crash_worker import MESSAGES, RESEARCHERS, approval, team

WORKER = Path(__file__).with_name("_crash_worker.py")
TRIALS = 20
EVENTS = 2 * (1 + len(RESEARCHERS) + 4)
"""Step record changes the child reports in a whole run (running and completed)."""

EXPECTED = [(0, "plan"), *((1, r) for r in RESEARCHERS), (2, "write"), (3, "review")]
EXPECTED += [(4, "write"), (5, "review")]


async def kill_at_random_point(db: Path, log: Path, thread_id: str, rng: random.Random) -> None:
    """Start the child and SIGKILL it after a random number of step events."""
    events, delay = rng.randint(0, EVENTS), rng.uniform(0, 0.004)
    command = [sys.executable, str(WORKER), "run", str(db), str(log), thread_id]
    async with await anyio.open_process(command) as process:
        assert process.stdout is not None and process.stderr is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(60):
            for _ in range(events):
                try:
                    await lines.receive_until(b"\n", 1 << 16)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
            await anyio.sleep(delay)
            if process.returncode is None:
                process.send_signal(signal.SIGKILL)
            code = await process.wait()
        if code not in (0, -signal.SIGKILL):
            error = b"".join([chunk async for chunk in process.stderr])
            pytest.fail(f"the child failed with code {code}: {error.decode()}")


async def resume_or_start(store: SQLiteStore, log: Path, thread_id: str) -> WorkflowThread:
    workflow = team(log)
    with anyio.fail_after(60):
        try:
            run = await WorkflowThread.load(thread_id, store=store)
        except ThreadNotFoundError:  # killed before the run's record was written
            return await workflow.run("agents", store=store, id=thread_id)
        return await workflow.resume(run, wait_for_lease=30)  # the dead child's lease expires


def check_side_effects(run: WorkflowThread, log: Path) -> dict[tuple[int, str], int]:
    """Each completed step ran exactly once: nothing started after its recorded attempt."""
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    starts = Counter(
        (e["superstep"], e["step"], e["attempt"]) for e in events if e["event"] == "start"
    )
    dones = Counter(
        (e["superstep"], e["step"], e["attempt"]) for e in events if e["event"] == "done"
    )
    assert all(count == 1 for count in starts.values()), starts
    history = run.execution.history
    completed = {(r.superstep, r.step): r.attempt for r in history if r.status == "completed"}
    assert sorted(completed, key=EXPECTED.index) == EXPECTED
    for (superstep, name), attempt in completed.items():
        tried = [a for (s, n, a) in starts if (s, n) == (superstep, name)]
        assert max(tried) == attempt, f"{name} started again after its completion was stored"
        assert dones[(superstep, name, attempt)] == 1
    recorded = {(r.superstep, r.step, r.attempt) for r in history}
    assert set(starts) <= recorded, "an attempt ran without a step record"
    assert {r.error for r in history if r.status != "completed"} <= {CRASHED}
    return completed


async def check_messages(run: WorkflowThread, completed: dict[tuple[int, str], int]) -> None:
    """The sub-threads hold each completed attempt's messages once, whole, and nothing else."""
    found: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for key in run.sub_thread_keys:
        messages = (await run.get_sub_thread(key)).messages
        assert len({m.id for m in messages}) == len(messages), f"duplicated message in {key}"
        for message in messages:
            if message.role == "tool":
                continue
            superstep, name, attempt, index = message.text.split("/")
            found[(int(superstep), name)].append((int(attempt), int(index)))
    assert sorted(found, key=EXPECTED.index) == EXPECTED
    for place, seen in found.items():
        winner = completed[place]
        assert seen == [(winner, i) for i in range(MESSAGES[place[1]])], f"torn or stale {place}"


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_a_run_killed_at_a_random_point_resumes_and_runs_each_step_once(
    trial: int, tmp_path: Path
) -> None:
    db, log, thread_id = tmp_path / "run.db", tmp_path / "effects.log", f"run-{trial}"
    await kill_at_random_point(db, log, thread_id, random.Random(trial))
    async with SQLiteStore(db) as store:
        run = await resume_or_start(store, log, thread_id)
        assert run.execution.status == "completed", run.execution.error
    async with SQLiteStore(db) as store:  # what is stored, read by a fresh connection
        stored = await WorkflowThread.load(thread_id, store=store)
        completed = check_side_effects(stored, log)
        await check_messages(stored, completed)
        expected_ran = [f"{s}/{name}" for s, name in EXPECTED]
        assert sorted(stored.state["ran"]) == sorted(expected_ran), "a patch applied twice"


class Child:
    """A `resume-team` child: its JSON lines, its stdin, its process."""

    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.lines = BufferedByteReceiveStream(process.stdout)

    async def next(self) -> dict[str, Any]:
        line = await self.lines.receive_until(b"\n", 1 << 16)
        event: dict[str, Any] = json.loads(line)
        return event

    async def until(self, wanted: dict[str, Any]) -> None:
        while await self.next() != wanted:
            pass

    async def outcome(self) -> dict[str, Any]:
        """The last line: the run's status or the error that stopped it."""
        while True:
            event = await self.next()
            if ("status" in event and "step" not in event) or "error" in event:
                return event

    async def send_line(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"go\n")


@asynccontextmanager
async def resuming(db: Path, log: Path, thread_id: str, *options: str) -> AsyncIterator[Child]:
    """A child resuming the team run `thread_id` (lease: `LEASE` seconds)."""
    command = [sys.executable, str(WORKER), "resume-team", str(db), str(log), thread_id]
    async with await anyio.open_process([*command, *options]) as process:
        with anyio.fail_after(60):
            yield Child(process)
            await process.wait()


async def create_run(db: Path, log: Path, thread_id: str) -> None:
    """A team run that has not started: what `resume` finds after a crash at its start."""
    async with SQLiteStore(db) as store:
        tasks = team(log).start_tasks("agents")
        await WorkflowThread.create(store, id=thread_id, workflow="team", next=tasks)


async def check_finished_once(db: Path, log: Path, thread_id: str) -> WorkflowThread:
    """The run completed, each finished step ran once, its messages are whole: read afresh."""
    async with SQLiteStore(db) as store:
        stored = await WorkflowThread.load(thread_id, store=store)
        assert stored.execution.status == "completed", stored.execution.error
        assert stored.lease is None
        await check_messages(stored, check_side_effects(stored, log))
        assert sorted(stored.state["ran"]) == sorted(f"{s}/{name}" for s, name in EXPECTED)
        return stored


async def test_a_second_process_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    db, log, thread_id = tmp_path / "run.db", tmp_path / "effects.log", "shared"
    await create_run(db, log, thread_id)
    async with resuming(db, log, thread_id, "--gate", "plan") as first:
        await first.until({"gate": "plan"})  # it holds the lease, mid-step
        second = await run_worker("resume-team", str(db), str(log), thread_id)
        assert second["error"] == "RunInProgressError"
        assert f":{first.process.pid}:" in second["owner"]
        await first.send_line()
        assert await first.outcome() == {"status": "completed"}
    await check_finished_once(db, log, thread_id)


@pytest.mark.parametrize("trial", range(3))
async def test_processes_racing_to_resume_one_run_run_each_step_once(
    trial: int, tmp_path: Path
) -> None:
    db, log, thread_id = tmp_path / "run.db", tmp_path / "effects.log", f"race-{trial}"
    await create_run(db, log, thread_id)
    outcomes: list[dict[str, Any]] = []

    async def resume() -> None:
        async with resuming(db, log, thread_id) as child:
            outcomes.append(await child.outcome())

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(resume)
    assert {"status": "completed"} in outcomes
    assert all(o == {"status": "completed"} or o["error"] == "RunInProgressError" for o in outcomes)
    await check_finished_once(db, log, thread_id)


async def test_a_killed_owner_is_taken_over_once_its_lease_expires(tmp_path: Path) -> None:
    db, log, thread_id = tmp_path / "run.db", tmp_path / "effects.log", "killed"
    await create_run(db, log, thread_id)
    async with resuming(db, log, thread_id, "--gate", "r2") as owner:
        await owner.until({"gate": "r2"})  # superstep 1 under way, r2 mid-step
        owner.process.send_signal(signal.SIGKILL)
    async with SQLiteStore(db) as store:
        workflow = team(log)
        ran = log.read_text()
        with pytest.raises(RunInProgressError) as refused:
            await workflow.resume(thread_id, store=store)
        assert f":{owner.process.pid}:" in refused.value.owner
        assert log.read_text() == ran, "the refused resume ran a step"
        with anyio.fail_after(10):
            run = await workflow.resume(thread_id, store=store, wait_for_lease=10)
        assert datetime.now(UTC) >= refused.value.expires_at
        assert run.execution.status == "completed"
    stored = await check_finished_once(db, log, thread_id)
    crashed = [(r.step, r.attempt) for r in stored.execution.history if r.error == CRASHED]
    assert ("r2", 1) in crashed


async def test_an_owner_stalled_past_its_lease_stops_without_writing(tmp_path: Path) -> None:
    db, log, thread_id = tmp_path / "run.db", tmp_path / "effects.log", "stalled"
    await create_run(db, log, thread_id)
    async with resuming(db, log, thread_id, "--stall", "plan") as stalled:
        await stalled.until({"stall": "plan"})  # its event loop stops: no more renewals
        async with SQLiteStore(db) as store:
            run = await team(log).resume(thread_id, store=store, wait_for_lease=10)
            assert run.execution.status == "completed"
            version = run.version
            messages = {k: [m.id for m in h.messages] for k, h in run.sub_threads.items()}
        await stalled.send_line()  # it wakes up holding a lease it lost
        assert await stalled.outcome() == {"error": "LeaseLostError", "holder": None}
    stored = await check_finished_once(db, log, thread_id)
    assert stored.version == version, "the stalled owner wrote the workflow record"
    assert {k: [m.id for m in h.messages] for k, h in stored.sub_threads.items()} == messages
    plan = [(r.attempt, r.status) for r in stored.execution.history if r.step == "plan"]
    assert plan == [(1, "failed"), (2, "completed")]


async def run_worker(*args: str) -> Any:
    result = await anyio.run_process([sys.executable, str(WORKER), *args])
    return json.loads(result.stdout.decode().splitlines()[-1])


async def test_a_paused_run_ends_its_process_and_resumes_with_a_reply_in_another(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "approval.db")
    first = await run_worker("approve", db, "approval-1")
    assert first["status"] == "paused"
    async with SQLiteStore(db) as store:
        paused = await WorkflowThread.load("approval-1", store=store)
        assert [r.prompt for r in paused.execution.interrupts] == [
            {"question": "publish?", "draft": "the draft"}
        ]
    assert await run_worker("resume", db, "approval-1", "yes") == {"status": "completed"}
    async with SQLiteStore(db) as store:
        run = await WorkflowThread.load("approval-1", store=store)
        last = run.execution.history[-1]
        assert last.step == "approve" and isinstance(last.output, dict)
        assert last.output["published"] is True and last.output["pid"] != first["pid"]
        assert [m.text for m in (await run.get_sub_thread("approve")).messages] == ["answer: yes"]
        assert [m.text for m in (await run.get_sub_thread("draft")).messages] == ["the draft"]
    assert approval().name == run.execution.workflow
